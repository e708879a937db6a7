import { availableParallelism } from 'node:os';
import { ConfigError, loadConfig } from '../../../src/config/load-config.js';

const base = { UPSTREAM_URL: 'http://127.0.0.1:9000' };

function problems(env: Record<string, string>, flags: Record<string, string> = {}): string[] {
  try {
    loadConfig(env, flags);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig(base);
    expect(config).toMatchObject({
      port: 8080,
      host: '::',
      upstreamUrl: 'http://127.0.0.1:9000',
      redisUrl: 'redis://127.0.0.1:6379',
      policyFile: 'policies/acquirer-api.yaml',
      trustedProxies: [],
      upstreamTimeoutMs: 30000,
      keyOutageGraceMs: 30000,
    });
    expect(config.trustedProxyList).toBeNull();
  });

  it('lets a flag of the same name override the variable', () => {
    const config = loadConfig({ ...base, PORT: '9000' }, { port: '9001', 'upstream-url': 'https://statements.internal:8443' });
    expect(config.port).toBe(9001);
    expect(config.upstreamUrl).toBe('https://statements.internal:8443');
  });

  it("takes an acquirer's share as half the upstream pool unless told a count", () => {
    expect(loadConfig(base).acquirerMaxInFlight).toBe(128);
    expect(loadConfig({ ...base, UPSTREAM_MAX_SOCKETS: '5' }).acquirerMaxInFlight).toBe(3);
    expect(loadConfig({ ...base, UPSTREAM_MAX_SOCKETS: '1' }).acquirerMaxInFlight).toBe(1);
    expect(loadConfig({ ...base, ACQUIRER_MAX_IN_FLIGHT: '16' }).acquirerMaxInFlight).toBe(16);
  });

  it('takes WORKERS as a count, or auto for one per core, and refuses anything else', () => {
    expect(loadConfig(base).workers).toBe(1);
    expect(loadConfig({ ...base, WORKERS: '4' }).workers).toBe(4);
    expect(loadConfig({ ...base, WORKERS: 'auto' }).workers).toBe(availableParallelism());
    for (const bad of ['0', '257', '-1', '2.5', 'all', '']) {
      expect(problems({ ...base, WORKERS: bad })).toEqual([`WORKERS: must be auto or an integer from 1 to 256 (got ${JSON.stringify(bad)})`]);
    }
  });

  it('parses trusted proxies into canonical CIDRs', () => {
    const config = loadConfig({ ...base, TRUSTED_PROXIES: '10.0.0.0/8, 192.0.2.1,::1' });
    expect(config.trustedProxies).toEqual(['10.0.0.0/8', '192.0.2.1', '::1']);
    expect(config.trustedProxyList).not.toBeNull();
  });

  it.each([
    [{}, 'UPSTREAM_URL: required (set UPSTREAM_URL or pass --upstream-url)'],
    [{ ...base, PORT: '70000' }, 'PORT: must be an integer from 0 to 65535 (got "70000")'],
    [{ ...base, PORT: '80a' }, 'PORT: must be an integer from 0 to 65535 (got "80a")'],
    [{ ...base, PORT: '-1' }, 'PORT: must be an integer from 0 to 65535 (got "-1")'],
    [{ UPSTREAM_URL: 'not a url' }, 'UPSTREAM_URL: must be an absolute http:// or https:// URL'],
    [{ UPSTREAM_URL: 'ftp://host' }, 'UPSTREAM_URL: must use http or https'],
    [{ UPSTREAM_URL: 'http://host/base' }, 'UPSTREAM_URL: must be an origin (scheme, host, port) without path, query or fragment'],
    [{ UPSTREAM_URL: 'http://user:s3cret@host' }, 'UPSTREAM_URL: must not contain credentials'],
    [{ ...base, HOST: 'nonexistent.invalid' }, 'HOST: must be an IPv4 or IPv6 address, e.g. :: or 127.0.0.1 (got "nonexistent.invalid")'],
    [{ ...base, TRUSTED_PROXIES: '10.0.0.1/8' }, 'TRUSTED_PROXIES: "10.0.0.1/8": host bits are set; did you mean 10.0.0.0/8? (got "10.0.0.1/8")'],
    [{ ...base, TRUSTED_PROXIES: '0.0.0.0/1, 128.0.0.0/1' }, 'TRUSTED_PROXIES: together these trust every IPv4 address (got "0.0.0.0/1, 128.0.0.0/1")'],
    [{ ...base, TRUSTED_PROXIES: '0.0.0.0/0' }, 'TRUSTED_PROXIES: "0.0.0.0/0": a /0 covers every address; list exactly the proxies\' addresses (got "0.0.0.0/0")'],
    [{ ...base, REDIS_URL: 'http://x' }, 'REDIS_URL: must use redis:// or rediss://'],
    [{ ...base, REDIS_URL: 'redis://:secret@x:6379/abc' }, 'REDIS_URL: the path must be a database number (redis://host:6379/2), or nothing'],
    [{ ...base, REDIS_URL: 'redis://x:6379/2/3' }, 'REDIS_URL: the path must be a database number (redis://host:6379/2), or nothing'],
    [{ ...base, REDIS_URL: 'redis://x:6379/02' }, 'REDIS_URL: the path must be a database number (redis://host:6379/2), or nothing'],
    [{ ...base, REDIS_URL: 'redis://x:6379/-1' }, 'REDIS_URL: the path must be a database number (redis://host:6379/2), or nothing'],
    [{ ...base, REDIS_URL: 'redis://x:6379/2?db=3' }, 'REDIS_URL: must not have a query or fragment (the database is the path: redis://host:6379/2)'],
    [{ ...base, REDIS_URL: 'redis://x:6379?password=secret' }, 'REDIS_URL: must not have a query or fragment (the database is the path: redis://host:6379/2)'],
    [{ ...base, UPSTREAM_TIMEOUT_MS: '0' }, 'UPSTREAM_TIMEOUT_MS: must be an integer from 1 to 3600000 (got "0")'],
    // Node reads a keep-alive timeout of 0 as none: an idle connection, even one with no valid key, would stay for ever.
    [{ ...base, KEEP_ALIVE_TIMEOUT_MS: '0' }, 'KEEP_ALIVE_TIMEOUT_MS: must be an integer from 1 to 600000 (got "0")'],
    [{ ...base, HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '30000' }, 'HEADERS_TIMEOUT_MS: must not be longer than REQUEST_TIMEOUT_MS'],
    [{ ...base, UPSTREAM_MAX_SOCKETS: '64', ACQUIRER_MAX_IN_FLIGHT: '65' }, 'ACQUIRER_MAX_IN_FLIGHT: must not be more than UPSTREAM_MAX_SOCKETS (64); about half of it leaves the other acquirers the rest'],
    [{ ...base, ACQUIRER_MAX_IN_FLIGHT: '0' }, 'ACQUIRER_MAX_IN_FLIGHT: must be half or an integer from 1 to 65535 (got "0")'],
    [{ ...base, LOG_LEVEL: 'loud' }, 'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent (got "loud")'],
  ])('refuses %j with one line naming the variable', (env, line) => {
    expect(problems(env as Record<string, string>)).toEqual([line]);
  });

  it.each(['redis://x', 'redis://x:6379', 'redis://x:6379/', 'redis://x:6379/0', 'redis://:pw@x:6379/15', 'rediss://x/123456789'])('takes %s', (url) => {
    expect(problems({ ...base, REDIS_URL: url })).toEqual([]);
  });

  it('never echoes a Redis URL, which may hold a password', () => {
    const [line] = problems({ ...base, REDIS_URL: 'http://user:secret@x' });
    expect(line).not.toContain('secret');
  });

  it('reads Sentinels as host:port lists, and refuses what does not combine', () => {
    const sentinel = { ...base, REDIS_SENTINELS: '10.0.0.1:26379, sentinel-2.redis:26379,[::1]:26380', REDIS_SENTINEL_NAME: 'mymaster' };
    expect(loadConfig(sentinel).redisSentinels).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: 'sentinel-2.redis', port: 26379 },
      { host: '::1', port: 26380 },
    ]);
    expect(problems({ ...base, REDIS_SENTINELS: 'host-only,h:70000' })).toEqual([
      'REDIS_SENTINELS: "host-only": must be host:port ([::1]:26379 for IPv6); "h:70000": must be host:port ([::1]:26379 for IPv6) (got "host-only,h:70000")',
    ]);
    expect(problems({ ...base, REDIS_SENTINELS: '10.0.0.1:26379' })).toEqual(['REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the name the Sentinels monitor the primary by)']);
    expect(problems({ ...base, REDIS_SENTINEL_NAME: 'mymaster' })).toEqual(['REDIS_SENTINEL_NAME: set, but REDIS_SENTINELS is empty']);
    const both = problems({ ...base, REDIS_URL: 'redis://u:secret@redis:6379', REDIS_PASSWORD: 'other-secret', REDIS_USERNAME: 'v' });
    expect(both).toEqual(['REDIS_PASSWORD: REDIS_URL holds a password too; set it in one place', 'REDIS_USERNAME: REDIS_URL holds a user too; set it in one place']);
    expect(problems({ ...base, REDIS_PASSWORD: 'x'.repeat(2000) }).join()).not.toContain('xxx');
  });

  it('reads Cluster nodes, and asks for a prefix whose hash tag keeps every key in one slot', () => {
    const cluster = { ...base, REDIS_CLUSTER_NODES: 'redis-0.redis:6379,10.0.0.2:6380', REDIS_KEY_PREFIX: '{agw}:' };
    expect(loadConfig(cluster).redisClusterNodes).toEqual([
      { host: 'redis-0.redis', port: 6379 },
      { host: '10.0.0.2', port: 6380 },
    ]);
    expect(loadConfig({ ...cluster, REDIS_KEY_PREFIX: 'prod:{acquirer-gateway}:' }).redisKeyPrefix).toBe('prod:{acquirer-gateway}:');
    expect(problems({ ...cluster, REDIS_KEY_PREFIX: 'acquirer-gateway:' })).toEqual([
      'REDIS_KEY_PREFIX: must hold a hash tag in Cluster mode, so that every key and the notice channel share one slot, e.g. {acquirer-gateway}: (got "acquirer-gateway:")',
    ]);
    // Redis hashes the whole key when the first `{` is closed at once: `{}` is no tag.
    expect(problems({ ...cluster, REDIS_KEY_PREFIX: '{}agw:' })).toHaveLength(1);
    expect(problems({ ...cluster, REDIS_KEY_PREFIX: 'agw}{' })).toHaveLength(1);
    expect(problems({ ...cluster, REDIS_SENTINELS: '10.0.0.1:26379', REDIS_SENTINEL_NAME: 'mymaster' })).toEqual([
      'REDIS_CLUSTER_NODES: set together with REDIS_SENTINELS; choose one way to reach Redis',
    ]);
    expect(problems({ ...cluster, REDIS_KEY_PREFIX: '{}:' })).toEqual([
      'REDIS_KEY_PREFIX: must hold a hash tag in Cluster mode, so that every key and the notice channel share one slot, e.g. {acquirer-gateway}: (got "{}:")',
    ]);
    // rediss:// in a REDIS_URL that is not used must not look like TLS.
    expect(problems({ ...cluster, REDIS_URL: 'rediss://redis:6379' })).toEqual(["REDIS_TLS: REDIS_URL's rediss:// is not used with REDIS_CLUSTER_NODES; set REDIS_TLS=true for TLS"]);
    expect(loadConfig({ ...cluster, REDIS_URL: 'rediss://redis:6379', REDIS_TLS: 'true' }).redisTls).toBe(true);
    // Without Cluster nodes a prefix needs no tag.
    expect(loadConfig({ ...base, REDIS_KEY_PREFIX: 'acquirer-gateway:' }).redisKeyPrefix).toBe('acquirer-gateway:');
  });
});
