/**
 * @module
 * A strict check of a JSON request body (RFC 8259) on its bytes, in one pass and without building a
 * value: the gateway forwards the original bytes, so all it needs is yes, or what is wrong and where.
 */

import { hexUnit, numberEnd, skipSpace, utf8End } from './json-lexemes.js';

export type JsonBodyProblem = 'invalid_utf8' | 'lone_surrogate' | 'byte_order_mark' | 'syntax' | 'too_deep' | 'duplicate_name' | 'tenant_field';

export interface JsonBodyRules {
  /** Arrays and objects nested deeper than this are refused (the body itself at depth 1). */
  readonly maxDepth: number;
  /** Member names that name the tenant, in lower case: a member whose unescaped name, lower-cased, is one of them, at any depth, is refused. */
  readonly tenantFields: ReadonlySet<string>;
}

/** What is wrong with a body, and the byte offset where it was found (for logs). */
export type JsonBodyRefusal = { readonly problem: JsonBodyProblem; readonly offset: number };

export const DEFAULT_MAX_DEPTH = 32;

const [QUOTE, BACKSLASH, COMMA, COLON, MINUS] = [0x22, 0x5c, 0x2c, 0x3a, 0x2d] as const;
const [OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET] = [0x7b, 0x7d, 0x5b, 0x5d] as const;

/** Bytes inside a string: 0 is an ordinary ASCII character, anything else needs a closer look. */
const STRING_BYTE = new Uint8Array(256);
STRING_BYTE.fill(1, 0, 0x20).fill(1, 0x80);
STRING_BYTE[QUOTE] = STRING_BYTE[BACKSLASH] = 1;

/** After a backslash: 1 for the one-character escapes, 2 for `u`. */
const ESCAPE = new Uint8Array(256);
for (const c of '"\\/bfnrt') ESCAPE[c.charCodeAt(0)] = 1;
ESCAPE[0x75] = 2;

const LITERALS: ReadonlyMap<number, Uint8Array> = new Map(['true', 'false', 'null'].map((word) => [word.charCodeAt(0), Buffer.from(word)]));

/**
 * null when `body` is exactly one JSON value, strictly by RFC 8259, within `rules`; otherwise the
 * first problem met reading from the start, and its byte offset (a member naming the tenant only when
 * nothing else is wrong). Deep input is walked with an explicit stack, so it never overflows the call
 * stack; names are decoded only to be compared.
 *
 * @example
 * checkJsonBody(Buffer.from('{"amount":1}'), { maxDepth: DEFAULT_MAX_DEPTH, tenantFields: new Set(['acquirer_id']) }); // null
 * checkJsonBody(Buffer.from('{"a":1,"\\u0061":2}'), rules); // { problem: 'duplicate_name', offset: 7 }
 */
export function checkJsonBody(body: Uint8Array, rules: JsonBodyRules): JsonBodyRefusal | null {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) return { problem: 'byte_order_mark', offset: 0 };
  return new BodyScan(body, rules).run();
}

/** Up to this many names of one object are compared as hashed byte spans; past that, as strings in a Set. */
const MAX_SPAN_NAMES = 64;

class BodyScan {
  private readonly bytes: Uint8Array;
  private readonly rules: JsonBodyRules;
  /** The same bytes as a Buffer, to decode the names that need it. */
  private readonly text: Buffer;
  /** The whole body as latin1, made when a plain name is first needed as a string: a slice costs less than a decode. */
  private latin1: string | undefined;
  private depth = 0;
  /** Per depth: whether the open container there is an object. */
  private readonly objects: boolean[] = [false];
  /** The names of the open objects as (start, end, hash) triples, each object's above its parent's: most names are never decoded. */
  private readonly spans: number[] = [];
  private spanTop = 0;
  /** Per depth: where the open object's spans begin. */
  private readonly spanBase: number[] = [];
  /** Per depth: the open object's names as strings, once one needed unescaping or they got too many for spans; else null. */
  private readonly decoded: (Set<string> | null)[] = [];
  /** Set by a string scan: the string had neither an escape nor a non-ASCII byte. */
  private plain = true;
  private problem: JsonBodyProblem = 'syntax';
  private offset = 0;
  /** Where the first member naming the tenant starts, or -1: refused only once the rest is well formed. */
  private tenantAt = -1;

  constructor(bytes: Uint8Array, rules: JsonBodyRules) {
    this.bytes = bytes;
    this.rules = rules;
    this.text = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  run(): JsonBodyRefusal | null {
    const b = this.bytes;
    const n = b.length;
    let i = skipSpace(b, 0, n);
    for (;;) {
      // A value is due at i.
      if (i >= n) return { problem: 'syntax', offset: i };
      const c = b[i]!;
      if (c === OPEN_BRACE || c === OPEN_BRACKET) {
        if (this.depth >= this.rules.maxDepth) return { problem: 'too_deep', offset: i };
        const object = c === OPEN_BRACE;
        this.objects[++this.depth] = object;
        this.spanBase[this.depth] = this.spanTop;
        this.decoded[this.depth] = null;
        i = skipSpace(b, i + 1, n);
        if (i >= n || b[i] !== (object ? CLOSE_BRACE : CLOSE_BRACKET)) {
          if (object && (i = this.member(i)) < 0) return this.refusal();
          continue;
        }
        this.spanTop = this.spanBase[this.depth--]!;
        i++;
      } else if ((i = this.scalar(i)) < 0) return this.refusal();
      // A value ended at i: close the containers it ends, then find where the next value is due.
      for (;;) {
        i = skipSpace(b, i, n);
        if (this.depth === 0) return i !== n ? { problem: 'syntax', offset: i } : this.tenantAt < 0 ? null : { problem: 'tenant_field', offset: this.tenantAt };
        const object = this.objects[this.depth];
        if (i < n && b[i] === COMMA) {
          i = skipSpace(b, i + 1, n);
          if (object && (i = this.member(i)) < 0) return this.refusal();
          break;
        }
        if (i < n && b[i] === (object ? CLOSE_BRACE : CLOSE_BRACKET)) {
          // Closing drops the names of the object, or of any object inside the array.
          this.spanTop = this.spanBase[this.depth--]!;
          i++;
          continue;
        }
        return { problem: 'syntax', offset: i };
      }
    }
  }

  /** A member's name and colon at `start`; the index where its value is due, or -1. */
  private member(start: number): number {
    const b = this.bytes;
    if (start >= b.length || b[start] !== QUOTE) return this.fail('syntax', start);
    const end = this.string(start);
    if (end < 0) return end;
    const problem = this.plain ? this.plainName(start + 1, end - 1) : this.escapedName(start, end);
    if (problem !== null) return this.fail(problem, start);
    const colon = skipSpace(b, end, b.length);
    if (colon >= b.length || b[colon] !== COLON) return this.fail('syntax', colon);
    return skipSpace(b, colon + 1, b.length);
  }

  /** A name of ASCII bytes and no escape, between `start` and `end`, compared without decoding it. */
  private plainName(start: number, end: number): JsonBodyProblem | null {
    const b = this.bytes;
    for (const field of this.rules.tenantFields) if (isAsciiLowerCase(b, start, end, field)) this.namesTenant(start - 1);
    const decoded = this.decoded[this.depth];
    if (decoded) return addName(decoded, this.slice(start, end));
    const hash = hashBytes(b, start, end);
    const { spans, spanTop: top } = this;
    const base = this.spanBase[this.depth]!;
    let clash = false;
    for (let k = base; k < top; k += 3) {
      if (spans[k + 2] !== hash) continue;
      if (sameBytes(b, spans[k]!, spans[k + 1]!, start, end)) return 'duplicate_name';
      clash = true;
    }
    // A clash of hashes between different names (perhaps crafted) moves the object to strings, so comparing stays linear.
    if (clash || top - base === 3 * MAX_SPAN_NAMES) return addName(this.decodeNames(), this.slice(start, end));
    spans[top] = start;
    spans[top + 1] = end;
    spans[top + 2] = hash;
    this.spanTop = top + 3;
    return null;
  }

  /** A name with an escape or a non-ASCII character: its literal (quotes included) at `start`..`end`, unescaped by JSON.parse. */
  private escapedName(start: number, end: number): JsonBodyProblem | null {
    const name = JSON.parse(this.text.toString('utf8', start, end)) as string;
    if (this.rules.tenantFields.has(name.toLowerCase())) this.namesTenant(start);
    return addName(this.decoded[this.depth] ?? this.decodeNames(), name);
  }

  /** Turns the open object's spans into strings, for a name that bytes alone cannot compare. */
  private decodeNames(): Set<string> {
    const names = new Set<string>();
    const base = this.spanBase[this.depth]!;
    for (let k = base; k < this.spanTop; k += 3) names.add(this.slice(this.spans[k]!, this.spans[k + 1]!));
    this.spanTop = base;
    this.decoded[this.depth] = names;
    return names;
  }

  private slice(start: number, end: number): string {
    this.latin1 ??= this.text.toString('latin1');
    return this.latin1.slice(start, end);
  }

  /** A string, number or literal at `start`; the index just past it, or -1. */
  private scalar(start: number): number {
    const b = this.bytes;
    const c = b[start]!;
    if (c === QUOTE) return this.string(start);
    if (c === MINUS || (c >= 0x30 && c <= 0x39)) {
      const end = numberEnd(b, start);
      return end >= 0 ? end : this.fail('syntax', ~end);
    }
    const word = LITERALS.get(c);
    if (word === undefined || start + word.length > b.length) return this.fail('syntax', start);
    for (let k = 1; k < word.length; k++) if (b[start + k] !== word[k]) return this.fail('syntax', start + k);
    return start + word.length;
  }

  /** The string whose opening quote is at `start`; the index just past its closing quote, or -1. */
  private string(start: number): number {
    const b = this.bytes;
    const n = b.length;
    let plain = true;
    let i = start + 1;
    for (;;) {
      while (i < n && STRING_BYTE[b[i]!] === 0) i++;
      if (i >= n) return this.fail('syntax', n);
      const c = b[i]!;
      if (c === QUOTE) break;
      plain = false;
      if (c === BACKSLASH) {
        const kind = i + 1 < n ? ESCAPE[b[i + 1]!]! : 0;
        if (kind === 0) return this.fail('syntax', i);
        if (kind === 1) {
          i += 2;
          continue;
        }
        const unit = hexUnit(b, i);
        if (unit < 0) return this.fail('syntax', i);
        // A surrogate escape stands for a character only as a high one then a low one: a lone one is no
        // text at all, and decoders differ on it (Ruby's json merges a high one with whatever follows).
        if (unit >= 0xdc00 && unit <= 0xdfff) return this.fail('lone_surrogate', i);
        if (unit >= 0xd800 && unit <= 0xdbff) {
          const low = hexUnit(b, i + 6);
          if (low < 0xdc00 || low > 0xdfff) return this.fail('lone_surrogate', i);
          i += 6;
        }
        i += 6;
      } else if (c < 0x20) {
        return this.fail('syntax', i);
      } else {
        const end = utf8End(b, i);
        if (end < 0) return this.fail('invalid_utf8', i);
        i = end;
      }
    }
    this.plain = plain;
    return i + 1;
  }

  /** A member at `offset` names the tenant: what else is wrong with the body is found first (a malformed body is that). */
  private namesTenant(offset: number): void {
    if (this.tenantAt < 0) this.tenantAt = offset;
  }

  private fail(problem: JsonBodyProblem, offset: number): -1 {
    this.problem = problem;
    this.offset = offset;
    return -1;
  }

  private refusal(): JsonBodyRefusal {
    return { problem: this.problem, offset: this.offset };
  }
}

function addName(names: Set<string>, name: string): JsonBodyProblem | null {
  if (names.has(name)) return 'duplicate_name';
  names.add(name);
  return null;
}

/** FNV-1a, cut to 30 bits so that it stays a small integer in a plain array. */
function hashBytes(b: Uint8Array, start: number, end: number): number {
  let hash = 0x811c9dc5;
  for (let k = start; k < end; k++) hash = Math.imul(hash ^ b[k]!, 0x01000193);
  return hash & 0x3fffffff;
}

function sameBytes(b: Uint8Array, start1: number, end1: number, start2: number, end2: number): boolean {
  if (end1 - start1 !== end2 - start2) return false;
  for (let k = 0; k < end1 - start1; k++) if (b[start1 + k] !== b[start2 + k]) return false;
  return true;
}

const asciiLower = (c: number): number => (c >= 0x41 && c <= 0x5a ? c | 0x20 : c);

/** Whether the ASCII bytes `start`..`end`, lower-cased as String.prototype.toLowerCase would, are `word`. */
function isAsciiLowerCase(b: Uint8Array, start: number, end: number, word: string): boolean {
  if (end - start !== word.length) return false;
  for (let k = 0; k < word.length; k++) if (asciiLower(b[start + k]!) !== word.charCodeAt(k)) return false;
  return true;
}

