import ipaddr from 'ipaddr.js';

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;

const IPV4_STRICT = /^(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}$/;
const PREFIX_STRICT = /^(?:0|[1-9][0-9]{0,2})$/;

/**
 * An address exactly as written, or null: IPv4 only in dotted decimal without leading zeros, and
 * `::a.b.c.d` turned into its hex groups first, since ipaddr.js would read it as the IPv4 `a.b.c.d`
 * (docs/request-handling.md, "Client address").
 */
function parseStrict(text: string): IpAddress | null {
  if (IPV4_STRICT.test(text)) return ipaddr.IPv4.isValidFourPartDecimal(text) ? ipaddr.IPv4.parse(text) : null;
  if (!text.includes(':')) return null;
  const zoneAt = text.indexOf('%');
  // A link-local peer's zone (an interface name, `eth0.100`, `br-lan`) matters to no whitelist entry,
  // which can hold none: it is checked for an interface name's characters and dropped.
  if (zoneAt !== -1 && !ZONE_ID.test(text.slice(zoneAt + 1))) return null;
  let address = zoneAt === -1 ? text : text.slice(0, zoneAt);
  const lastColon = address.lastIndexOf(':');
  const tail = address.slice(lastColon + 1);
  if (tail.includes('.')) {
    if (!IPV4_STRICT.test(tail) || !ipaddr.IPv4.isValidFourPartDecimal(tail)) return null;
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    address = `${address.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  return ipaddr.IPv6.isValid(address) ? ipaddr.IPv6.parse(address) : null;
}

const ZONE_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** `everyAddress`: refused because it covers every address (a /0); each caller says what to do instead. */
export type CidrParseResult = { ok: true; cidr: string } | { ok: false; reason: string; everyAddress?: true };

/**
 * Validates one whitelist entry as an administrator wrote it and returns its canonical CIDR.
 * Strict on purpose: IPv4 with leading zeros (octal to some parsers), host bits set under the prefix
 * (a typo that widens or narrows the range), zone ids and /0 (everything) are refused.
 * A bare address means that one address; an IPv4-mapped IPv6 entry is stored as IPv4.
 */
export function parseCidr(text: string): CidrParseResult {
  const [addressText = '', prefixText, ...rest] = text.trim().split('/');
  if (rest.length > 0) return { ok: false, reason: 'more than one "/"' };
  if (addressText.includes('%')) return { ok: false, reason: 'zone ids are not allowed' };
  if (IPV4_STRICT.test(addressText) && !ipaddr.IPv4.isValidFourPartDecimal(addressText)) return { ok: false, reason: 'IPv4 octet out of range' };
  let address = parseStrict(addressText);
  if (address === null) return { ok: false, reason: 'not an IPv4 address in dotted decimal without leading zeros, or an IPv6 address' };
  const width = address.kind() === 'ipv4' ? 32 : 128;
  let prefix = width;
  if (prefixText !== undefined) {
    if (!PREFIX_STRICT.test(prefixText)) return { ok: false, reason: 'prefix length must be a decimal number' };
    prefix = Number(prefixText);
    if (prefix > width) return { ok: false, reason: `prefix length must be at most ${width}` };
    if (prefix === 0) return { ok: false, reason: 'a /0 covers every address', everyAddress: true };
  }
  if (address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress()) {
    if (prefix < 96) return { ok: false, reason: 'an IPv4-mapped range must have a prefix of at least 96' };
    address = address.toIPv4Address();
    prefix -= 96;
    if (prefix === 0) return { ok: false, reason: 'a /0 covers every address', everyAddress: true };
  }
  const network = address.kind() === 'ipv4'
    ? ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${prefix}`)
    : ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${prefix}`);
  if (network.toString() !== address.toString()) {
    return { ok: false, reason: `host bits are set; did you mean ${network.toString()}/${prefix}?` };
  }
  const full = address.kind() === 'ipv4' ? 32 : 128;
  return { ok: true, cidr: prefix === full ? address.toString() : `${address.toString()}/${prefix}` };
}

/** The first and last address of a canonical CIDR (as parseCidr returns it), as numbers. */
function addressRange(cidr: string): { family: 'IPv4' | 'IPv6'; first: bigint; last: bigint } {
  const [address, prefix] = cidr.includes('/') ? ipaddr.parseCIDR(cidr) : [ipaddr.parse(cidr), cidr.includes(':') ? 128 : 32];
  const bits = address.kind() === 'ipv4' ? 32 : 128;
  const first = address.toByteArray().reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
  return { family: bits === 32 ? 'IPv4' : 'IPv6', first, last: first + (1n << BigInt(bits - prefix)) - 1n };
}

const IPV4_MAPPED = { family: 'IPv6', first: 0xffffn << 32n, last: (0xffffn << 32n) + 0xffffffffn } as const;

/**
 * The address family whose every address the entries allow together (`0.0.0.0/1` and `128.0.0.0/1`,
 * say), or null. A /0 is refused entry by entry; this catches the same "any address" spelled in parts.
 */
export function familyCoveredWhole(cidrs: readonly string[]): 'IPv4' | 'IPv6' | null {
  for (const family of ['IPv4', 'IPv6'] as const) {
    const ranges = cidrs.map(addressRange).filter((r) => r.family === family);
    // IPv4-mapped IPv6 is judged as IPv4, never as IPv6: entries covering every other IPv6 address
    // cover every IPv6 address a client can be seen from.
    if (family === 'IPv6') ranges.push(IPV4_MAPPED);
    ranges.sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
    // The first address not yet covered, walking the ranges in order.
    let next = 0n;
    for (const range of ranges) {
      if (range.first > next) break;
      if (range.last + 1n > next) next = range.last + 1n;
    }
    if (next === 1n << (family === 'IPv4' ? 32n : 128n)) return family;
  }
  return null;
}

/**
 * Parses an address as it comes from a socket or a proxy header, as strictly as a whitelist entry is
 * written (parseStrict). IPv4-mapped IPv6 (`::ffff:a.b.c.d`, and nothing else) becomes IPv4, so one
 * whitelist entry covers both spellings of the same client. Null when unparseable.
 */
export function parseAddress(text: string | undefined): IpAddress | null {
  const address = text === undefined ? null : parseStrict(text);
  return address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress() ? address.toIPv4Address() : address;
}

/** A compiled set of CIDRs. */
export interface IpAllowlist {
  contains(address: IpAddress): boolean;
}

/** Compiles canonical CIDRs (as parseCidr returns them) once, for matching many times. */
export function compileAllowlist(cidrs: readonly string[]): IpAllowlist {
  const ranges = cidrs.map((cidr) => (cidr.includes('/') ? ipaddr.parseCIDR(cidr) : ipaddr.parseCIDR(`${cidr}/${cidr.includes(':') ? 128 : 32}`)));
  return {
    contains(address) {
      const kind = address.kind();
      for (const range of ranges) {
        if (range[0].kind() === kind && address.match(range)) return true;
      }
      return false;
    },
  };
}
