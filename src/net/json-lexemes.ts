/**
 * @module
 * The lexical pieces of JSON (RFC 8259) read on bytes, for the body check (json-body.ts): whitespace,
 * numbers, `\u` escapes and UTF-8 sequences. Each returns where its piece ends.
 */

const [BACKSLASH, MINUS] = [0x5c, 0x2d] as const;

const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

/** The code unit of the `\uXXXX` escape at `i`, or -1 when there is none. */
export function hexUnit(b: Uint8Array, i: number): number {
  if (i + 5 >= b.length || b[i] !== BACKSLASH || b[i + 1] !== 0x75) return -1;
  let unit = 0;
  for (let k = 2; k < 6; k++) {
    const c = b[i + k]!;
    if (!HEX[c]) return -1;
    unit = unit * 16 + (c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57);
  }
  return unit;
}

export function skipSpace(b: Uint8Array, i: number, n: number): number {
  while (i < n && (b[i] === 0x20 || b[i] === 0x0a || b[i] === 0x0d || b[i] === 0x09)) i++;
  return i;
}

const isDigit = (b: Uint8Array, i: number): boolean => i < b.length && b[i]! >= 0x30 && b[i]! <= 0x39;

/** The index just past the number at `i`, or the complement (`~`) of where it goes wrong. Any length is fine: the upstream reads it. */
export function numberEnd(b: Uint8Array, i: number): number {
  if (b[i] === MINUS) i++;
  if (!isDigit(b, i)) return ~i;
  // A leading zero stands alone; what follows it is judged by the caller (`01` ends at `1`, a syntax error there).
  if (b[i++] !== 0x30) while (isDigit(b, i)) i++;
  if (i < b.length && b[i] === 0x2e) {
    if (!isDigit(b, ++i)) return ~i;
    while (isDigit(b, i)) i++;
  }
  if (i < b.length && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < b.length && (b[i] === 0x2b || b[i] === MINUS)) i++;
    if (!isDigit(b, i)) return ~i;
    while (isDigit(b, i)) i++;
  }
  return i;
}

/** The index just past the well-formed UTF-8 sequence at `i` (Unicode Table 3-7), or -1: overlong, surrogate, above U+10FFFF or cut short. */
export function utf8End(b: Uint8Array, i: number): number {
  const lead = b[i]!;
  if (lead < 0xc2 || lead > 0xf4) return -1;
  const length = lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
  if (i + length > b.length) return -1;
  // Only the second byte's range depends on the lead; the rest are any continuation byte.
  const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
  const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
  if (b[i + 1]! < low || b[i + 1]! > high) return -1;
  for (let k = 2; k < length; k++) if ((b[i + k]! & 0xc0) !== 0x80) return -1;
  return i + length;
}
