import http from 'node:http';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { startTestRedis, type TestRedis, waitForSubscribers } from '../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';

/**
 * Redis stopped, black-holed and back, mid-run. The gateway reaches Redis through a relay the test
 * can break; key administration talks to Redis directly, as it would from another host.
 */
const LIST = '/v1/acquirer/eod_statements';
const FAIL_FAST_BOUND_MS = 1000;
const GRACE_MS = 1500;

let redis: TestRedis;
let relay: TcpProxy;
let upstream: RecordingUpstream;
let gateway: ServeProcess;
let env: Record<string, string>;

beforeAll(async () => {
  redis = await startTestRedis();
  relay = await startTcpProxy(redis.url);
  upstream = await startUpstream();
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  gateway = await startServe({
    REDIS_URL: relay.url,
    REDIS_KEY_PREFIX: redis.prefix,
    UPSTREAM_URL: upstream.url,
    KEY_OUTAGE_GRACE_MS: String(GRACE_MS),
    REDIS_COMMAND_TIMEOUT_MS: '300',
  });
  await waitForSubscribers(redis, 1);
}, 30_000);

afterAll(() =>
  stopAll(
    () => gateway?.stop(),
    () => relay?.close(),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

/** A request that must be answered within `boundMs`, or the test fails (no hang, no queue). */
function call(key: string, boundMs = FAIL_FAST_BOUND_MS): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: gateway.port, path: LIST, agent: false, headers: { authorization: `Bearer ${key}` } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.setTimeout(boundMs, () => req.destroy(new Error(`no answer within ${boundMs} ms`)));
    req.on('error', reject);
  });
}

const UNAVAILABLE = { status: 503, body: '{"message":"Service unavailable"}' };

it('Redis stopped: uncached keys get 503 at once, cached keys work for the grace period, then 503; recovery is automatic', async () => {
  const cached = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  const uncached = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect((await call(cached.key)).status).toBe(200);

  await relay.cut();
  expect(await call(uncached.key)).toEqual(UNAVAILABLE);
  expect((await call(cached.key)).status).toBe(200);
  await waitFor(async () => (await call(cached.key)).status === 503, { timeoutMs: GRACE_MS + 2000, what: 'grace period to end' });
  expect(await call(uncached.key)).toEqual(UNAVAILABLE);

  await relay.heal();
  await waitFor(async () => (await call(uncached.key)).status === 200, { timeoutMs: 5000, what: 'recovery' });
  expect((await call(cached.key)).status).toBe(200);
}, 20_000);

it('Redis black-holed: cached keys work for the grace period only, though no lookup ever failed', async () => {
  const cached = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect((await call(cached.key)).status).toBe(200);
  relay.blackhole();
  // Only the cached key is used: the sockets stay open and silent, so nothing but the health
  // check's unanswered PING can tell the gateway Redis is gone. KEY_CACHE_TTL_MS is 60 s.
  await waitFor(async () => (await call(cached.key)).status === 503, { timeoutMs: GRACE_MS + 4000, what: 'grace period to end' });
  await relay.heal();
  await waitFor(async () => (await call(cached.key)).status === 200, { timeoutMs: 5000, what: 'recovery' });
}, 20_000);

it('Redis black-holed: an uncached key gets 503 within the bound, never a hang', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  relay.blackhole();
  expect(await call(key.key)).toEqual(UNAVAILABLE);
  await relay.heal();
  await waitFor(async () => (await call(key.key)).status === 200, { timeoutMs: 5000, what: 'recovery' });
}, 20_000);

it('while change notices cannot arrive, cached keys are re-checked in Redis each second', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect((await call(key.key)).status).toBe(200);
  relay.blackholeMatching('acquirer-gateway:events'); // commands still work; the subscription does not
  // Seen by the health check's unanswered PING (every second, 300 ms timeout): the notices are down.
  await waitFor(async () => /^acquirer_gateway_key_change_notices_up 0$/m.test((await request(gateway.adminUrl, '/metrics')).body.toString()), { what: 'the notices seen down' });
  expect((await call(key.key)).status).toBe(200);
  expect((await runCli(['keys', 'disable', key.id], env)).code).toBe(0);
  await waitFor(async () => (await call(key.key)).status === 401, { timeoutMs: 1_500, intervalMs: 50, what: 'the disable to be seen within 1 s' });
  await relay.heal();
}, 20_000);

it('after a cut, a disable made during it is seen once Redis is back (notices may have been missed)', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect((await call(key.key)).status).toBe(200);
  await relay.cut();
  // Disabled while this gateway cannot hear about it.
  expect((await runCli(['keys', 'disable', key.id], env)).code).toBe(0);
  await relay.heal();
  // KEY_CACHE_TTL_MS is 60 s: the resync on reconnect (or the 1 s trust while notices were down) makes this 401 this soon.
  await waitFor(async () => (await call(key.key)).status === 401, { timeoutMs: 5000, what: 'resync after reconnect' });
}, 20_000);

describe('a gateway that starts while its change subscription cannot be made', () => {
  let late: ServeProcess;
  beforeAll(async () => {
    relay.blackholeMatching('acquirer-gateway:events');
    late = await startServe({
      REDIS_URL: relay.url,
      REDIS_KEY_PREFIX: redis.prefix,
      UPSTREAM_URL: upstream.url,
      KEY_OUTAGE_GRACE_MS: '60000', // no outage grace can explain a disable seen within seconds
      REDIS_COMMAND_TIMEOUT_MS: '300',
    });
  });
  afterAll(async () => {
    await late.stop();
    await relay.heal();
  });

  it('is ready, says it hears no change notices, and sees a disable within a second of its last lookup', async () => {
    const ready = await request(late.adminUrl, '/readyz');
    expect([ready.status, JSON.parse(ready.body.toString()).checks.key_store]).toEqual([200, 'no_change_notices']);
    const metrics = (await request(late.adminUrl, '/metrics')).body.toString();
    expect(metrics).toMatch(/^acquirer_gateway_key_change_notices_up 0$/m);
    expect(metrics).toMatch(/^acquirer_gateway_key_store_up 1$/m);
    const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const get = () => request(late.url, LIST, { authorization: `Bearer ${key.key}` });
    expect((await get()).status).toBe(200); // looked up in Redis, cached
    expect((await runCli(['keys', 'disable', key.id], env)).code).toBe(0); // the notice reaches nobody
    const disabledAt = Date.now();
    await waitFor(async () => (await get()).status === 401, { timeoutMs: 5000, what: 'the disable to be seen' });
    // Trusted 1 s at most, and looked up again: not the 60 s of the grace, nor the TTL.
    expect(Date.now() - disabledAt).toBeLessThan(2_000);
  }, 20_000);

  it('hears change notices once the first subscription succeeds, and says so', async () => {
    await relay.heal();
    await waitFor(async () => JSON.parse((await request(late.adminUrl, '/readyz')).body.toString()).checks.key_store === 'ok', { what: 'the subscription' });
    expect((await request(late.adminUrl, '/metrics')).body.toString()).toMatch(/^acquirer_gateway_key_change_notices_up 1$/m);
  }, 20_000);
});

describe('a database in REDIS_URL that this Redis refuses', () => {
  /** The test Redis has 16 databases: SELECT 99 is refused, and ioredis would go on, on database 0. */
  const refusedDatabase = () => {
    const url = new URL(redis.url);
    url.pathname = '/99';
    return url.toString();
  };

  it('leaves the key store unavailable: no key is checked against database 0\'s', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_db0', permissions: ['eod_list'] }); // where the test Redis keeps them
    const wrong = await startServe({ REDIS_URL: refusedDatabase(), REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url });
    try {
      const line = await waitFor(() => wrong.logLines.map((l) => JSON.parse(l)).find((e) => String(e.err?.message).startsWith('Redis refused the database REDIS_URL names')), { what: 'the refusal in the log' });
      expect(line.err.message).toContain('DB index is out of range');
      const before = upstream.received.length;
      const res = await request(wrong.url, LIST, { authorization: `Bearer ${key}` });
      expect({ status: res.status, body: res.body.toString() }).toEqual(UNAVAILABLE);
      const ready = await request(wrong.adminUrl, '/readyz');
      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.body.toString())).toMatchObject({ checks: { key_store: 'unavailable' } });
      expect(upstream.received.length).toBe(before);
    } finally {
      await wrong.stop();
    }
  });

  it('fails key administration with the reason, rather than listing database 0\'s keys', async () => {
    await createKey(env, { acquirer: 'acq_db0', permissions: ['eod_list'] });
    const result = await runCli(['keys', 'list'], { REDIS_URL: refusedDatabase(), REDIS_KEY_PREFIX: redis.prefix });
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('Redis refused the database REDIS_URL names: ERR DB index is out of range');
  });
});
