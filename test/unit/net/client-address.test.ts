import { MAX_FORWARDED_HOPS, resolveClientAddress } from '../../../src/net/client-address.js';
import { compileAllowlist, parseAddress } from '../../../src/net/ip-allowlist.js';

const trusted = compileAllowlist(['10.0.0.0/8', '::1']);
const resolve = (socket: string | undefined, xff: string | undefined, proxies = trusted) =>
  resolveClientAddress(parseAddress(socket), xff, proxies)?.toString() ?? null;

describe('resolveClientAddress', () => {
  it('uses the socket peer when no proxy is trusted, ignoring a spoofed X-Forwarded-For', () => {
    expect(resolveClientAddress(parseAddress('198.51.100.1'), '203.0.113.5', null)?.toString()).toBe('198.51.100.1');
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', () => {
    expect(resolve('198.51.100.1', '203.0.113.5')).toBe('198.51.100.1');
  });

  it('counts an IPv4-mapped peer as its IPv4 address', () => {
    expect(resolve('::ffff:198.51.100.1', undefined)).toBe('198.51.100.1');
    expect(resolve('::ffff:10.1.1.1', '203.0.113.5')).toBe('203.0.113.5'); // mapped trusted proxy
  });

  it('takes the right-most address that is not a trusted proxy', () => {
    expect(resolve('10.0.0.2', '203.0.113.5')).toBe('203.0.113.5');
    expect(resolve('10.0.0.2', '192.0.2.66, 203.0.113.5, 10.0.0.9')).toBe('203.0.113.5');
    expect(resolve('::1', '192.0.2.66,203.0.113.5')).toBe('203.0.113.5');
  });

  it('falls back to the left-most hop when every hop is trusted, and to the peer with no header', () => {
    expect(resolve('10.0.0.2', '10.0.0.3, 10.0.0.4')).toBe('10.0.0.3');
    expect(resolve('10.0.0.2', undefined)).toBe('10.0.0.2');
    expect(resolve('10.0.0.2', '  ')).toBe('10.0.0.2');
  });

  it('cannot judge an unparseable hop or peer: null', () => {
    expect(resolve('10.0.0.2', '203.0.113.5, garbage')).toBeNull();
    expect(resolve('10.0.0.2', '203.0.113.5:4711')).toBeNull();
    expect(resolve(undefined, undefined)).toBeNull();
  });

  it(`looks at no more than ${MAX_FORWARDED_HOPS} addresses, and cannot judge a longer chain of trusted ones`, () => {
    const trustedHops = (n: number) => Array.from({ length: n }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
    expect(resolve('10.0.0.2', ['203.0.113.5', ...trustedHops(MAX_FORWARDED_HOPS - 1)].join(', '))).toBe('203.0.113.5');
    expect(resolve('10.0.0.2', ['203.0.113.5', ...trustedHops(MAX_FORWARDED_HOPS)].join(', '))).toBeNull();
    expect(resolve('10.0.0.2', trustedHops(MAX_FORWARDED_HOPS).join(', '))).toBe('10.0.0.0');
    expect(resolve('10.0.0.2', ['garbage', ...trustedHops(5000)].join(', '))).toBeNull();
  });

  it('does not reach past an untrusted hop to an unparseable one', () => {
    expect(resolve('10.0.0.2', 'garbage, 203.0.113.5')).toBe('203.0.113.5');
  });
});
