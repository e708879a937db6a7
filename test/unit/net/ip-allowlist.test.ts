import ipaddr from 'ipaddr.js';
import { compileAllowlist, familyCoveredWhole, parseAddress, parseCidr } from '../../../src/net/ip-allowlist.js';

describe('parseCidr (whitelist entries as written by an administrator)', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['203.0.113.0/24', '203.0.113.0/24'],
    ['10.0.0.0/8', '10.0.0.0/8'],
    ['203.0.113.7/32', '203.0.113.7'],
    ['2001:db8::/32', '2001:db8::/32'],
    ['2001:DB8:0:0::1', '2001:db8::1'],
    ['::1', '::1'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.0/120', '203.0.113.0/24'],
    [' 192.0.2.1 ', '192.0.2.1'],
    // IPv4-compatible (deprecated), not IPv4-mapped: an IPv6 range, not 203.0.113.0/24.
    ['::203.0.113.0/120', '::cb00:7100/120'],
  ])('accepts %s as %s', (input, cidr) => {
    expect(parseCidr(input)).toEqual({ ok: true, cidr });
  });

  it.each([
    ['010.0.0.1', /dotted decimal/],
    ['10.0.0.01', /dotted decimal/],
    ['256.0.0.1', /out of range/],
    ['10.0.0', /dotted decimal/],
    ['0x0a.0.0.1', /dotted decimal/],
    ['10.0.0.1/8', /host bits are set; did you mean 10.0.0.0\/8/],
    ['2001:db8::1/32', /host bits are set; did you mean 2001:db8::\/32/],
    ['10.0.0.0/33', /at most 32/],
    ['10.0.0.0/08', /decimal/],
    ['10.0.0.0/', /decimal/],
    ['0.0.0.0/0', /\/0/],
    ['::/0', /\/0/],
    ['::ffff:0:0/96', /\/0/],
    ['fe80::1%eth0', /zone/],
    ['10.0.0.0/8/8', /more than one/],
    ['example.com', /not an IPv4/],
    ['', /not an IPv4/],
    ['::ffff:203.0.113.0/64', /at least 96/],
    ['::ffff:010.0.0.5', /dotted decimal/],
    ['::ffff:0xa.0.0.1', /dotted decimal/],
  ])('refuses %s', (input, reason) => {
    const result = parseCidr(input);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(reason);
  });
});

describe('compileAllowlist', () => {
  const allowlist = compileAllowlist(['203.0.113.0/24', '198.51.100.7', '2001:db8::/32']);
  const contains = (text: string) => allowlist.contains(parseAddress(text)!);

  it.each([
    ['203.0.113.1', true],
    ['203.0.113.255', true],
    ['203.0.114.1', false],
    ['198.51.100.7', true],
    ['198.51.100.8', false],
    ['::ffff:203.0.113.9', true], // IPv4-mapped IPv6 counts as its IPv4 address
    ['::ffff:198.51.100.8', false],
    ['2001:db8:1::5', true],
    ['2001:db9::5', false],
    ['::1', false],
    // IPv4-compatible: an IPv6 peer of its own, whatever IPv4 address its last 32 bits spell.
    ['::203.0.113.9', false],
    ['::198.51.100.7', false],
  ])('%s → %s', (address, expected) => {
    expect(contains(address)).toBe(expected);
  });
});

describe('parseAddress', () => {
  it('maps IPv4-mapped IPv6 to IPv4 and refuses garbage', () => {
    expect(parseAddress('::ffff:127.0.0.1')?.toString()).toBe('127.0.0.1');
    expect(parseAddress('::1')?.toString()).toBe('::1');
    expect(parseAddress('not-an-ip')).toBeNull();
    expect(parseAddress(undefined)).toBeNull();
  });

  it('reads ::a.b.c.d as the IPv6 address it is, not as IPv4', () => {
    expect(parseAddress('::203.0.113.5')?.toString()).toBe('::cb00:7105');
    expect(parseAddress('::203.0.113.5')?.kind()).toBe('ipv6');
    expect(parseAddress('64:ff9b::203.0.113.5')?.toString()).toBe('64:ff9b::cb00:7105');
    expect(parseAddress('::FFFF:203.0.113.5')?.toString()).toBe('203.0.113.5');
    // A socket's link-local peer, on any interface (a VLAN's, a bridge's): the zone matters to no entry.
    for (const peer of ['fe80::1%eth0', 'fe80::1%eth0.100', 'fe80::1%br-lan', 'fe80::1%2']) expect(parseAddress(peer)?.toString()).toBe('fe80::1');
    expect(parseAddress('fe80::1%')).toBeNull();
    expect(parseAddress('fe80::1%eth0 x')).toBeNull();
  });

  it.each([
    '3405803777', '0xcb007105', '0313.0.113.5', '203.000.113.005', '0203.0.113.5', '203.0.113', '127.2',
    '::ffff:010.0.0.5', '::ffff:0xa.0.0.1', '::1.2.3', '1.2.3.4:80', '[::1]', 'unknown', '',
  ])('refuses the legacy or odd spelling %j (no parser may read it another way than the whitelist does)', (text) => {
    expect(parseAddress(text)).toBeNull();
  });
});

describe('familyCoveredWhole ("any address" spelled in parts)', () => {
  /** 0.0.0.0/1, 128.0.0.0/2, … 255.255.255.254/32: every IPv4 address but the last. */
  const dotted = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join('.');
  const allButLast = Array.from({ length: 32 }, (_, i) => `${dotted(2 ** 32 - 2 ** (32 - i))}/${i + 1}`);

  /** The 96 networks beside ::ffff:0:0/96 on its way down from ::/0: every IPv6 address but the IPv4-mapped. */
  const mapped = 0xffffn << 32n;
  const allIPv6ButMapped = Array.from({ length: 96 }, (_, i) => {
    const length = BigInt(i + 1);
    const network = ((mapped >> (128n - length)) ^ 1n) << (128n - length);
    const bytes = Array.from({ length: 16 }, (_, b) => Number((network >> BigInt(8 * (15 - b))) & 0xffn));
    return `${ipaddr.fromByteArray(bytes).toString()}/${i + 1}`;
  });

  /** 128.0.0.0/1, 64.0.0.0/2, … 0.0.0.1/32: every IPv4 address but the first. */
  const allButFirst = Array.from({ length: 32 }, (_, i) => `${dotted(2 ** (31 - i))}/${i + 1}`);
  /** 0.0.0.0/1 and 128.0.0.1 to the end: a hole of one address in the middle. */
  const holeAt128 = ['0.0.0.0/1', ...Array.from({ length: 31 }, (_, i) => `${dotted(2 ** 31 + 2 ** (30 - i))}/${i + 2}`)];

  it.each([
    [allButFirst, null],
    [[...allButFirst, '0.0.0.0'], 'IPv4'],
    [holeAt128, null],
    [[...holeAt128, '128.0.0.0'], 'IPv4'],
    [['0.0.0.0/1', '128.0.0.0/1'], 'IPv4'],
    [['128.0.0.0/1', '10.0.0.0/8', '0.0.0.0/1'], 'IPv4'], // in any order, one inside another
    [['0.0.0.0/2', '64.0.0.0/2', '128.0.0.0/1', '2001:db8::/32'], 'IPv4'],
    [[...allButLast, '255.255.255.255'], 'IPv4'],
    [['::/1', '8000::/1'], 'IPv6'],
    [allButLast, null],
    [['0.0.0.0/1', '192.0.0.0/2'], null], // 128.0.0.0/2 missing
    [['0.0.0.0/1', '::/1', '8000::/2'], null],
    // Every IPv6 address but the IPv4-mapped ones, which are judged as IPv4: every IPv6 peer there can be.
    [allIPv6ButMapped, 'IPv6'],
    [allIPv6ButMapped.slice(1), null],
    [['203.0.113.0/24', '198.51.100.7', '2001:db8::/32'], null],
    [[], null],
  ])('%j → %s', (cidrs, family) => {
    expect(familyCoveredWhole(cidrs)).toBe(family);
  });

  it('the list above is what it says', () => {
    expect(allButLast.slice(0, 3)).toEqual(['0.0.0.0/1', '128.0.0.0/2', '192.0.0.0/3']);
    expect(allButLast.at(-1)).toBe('255.255.255.254/32');
    expect(allButFirst.slice(0, 2).concat(allButFirst.slice(-1))).toEqual(['128.0.0.0/1', '64.0.0.0/2', '0.0.0.1/32']);
    expect(holeAt128.slice(0, 3).concat(holeAt128.slice(-1))).toEqual(['0.0.0.0/1', '192.0.0.0/2', '160.0.0.0/3', '128.0.0.1/32']);
    expect([...allButLast, ...allButFirst, ...holeAt128, ...allIPv6ButMapped].every((cidr) => parseCidr(cidr).ok)).toBe(true);
    expect(allIPv6ButMapped.slice(0, 2).concat(allIPv6ButMapped.slice(-1))).toEqual(['8000::/1', '4000::/2', '::fffe:0:0/96']);
  });
});
