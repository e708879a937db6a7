import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createKey, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request, type HttpResult } from '../helpers/http.js';
import { metricValue } from '../helpers/metrics.js';
import { rateLimitedPolicyText } from '../helpers/policy.js';
import { parseRawResponse, sendRaw } from '../helpers/raw.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { tempDir } from '../helpers/temp-dir.js';
import { emptyStatementList, startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Rates per key through `serve`, against real Redis: the fleet's budget in Redis (one script), the
 * local store's share per live instance, what an unanswered Redis means, and a refusal before a body.
 * A rate of one request every 20 s: no budget refills while a test runs.
 */
const LIST = '/v1/acquirer/eod_statements';
const USERS = '/v1/acquirer/merchants/m1/users';
const TOO_MANY = '{"message":"Too many requests"}';
const POLICY_TEXT = rateLimitedPolicyText({ defaultRate: '{ per_second: 0.05, burst: 4 }' });

let redis: TestRedis;
let upstream: RecordingUpstream;
let policyFile: string;
const running: ServeProcess[] = [];

const redisEnv = () => ({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix });
async function serve(extra: Record<string, string>, on: TestRedis = redis): Promise<ServeProcess> {
  const g = await startServe({ REDIS_URL: on.url, REDIS_KEY_PREFIX: on.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile, ...extra });
  running.push(g);
  return g;
}
const newKey = async (on: TestRedis = redis, permissions = ['eod_list', 'eod_read']) =>
  createKey({ REDIS_URL: on.url, REDIS_KEY_PREFIX: on.prefix }, { acquirer: 'acq_rates', permissions });
const metricsText = async (g: ServeProcess) => (await request(g.adminUrl, '/metrics')).body.toString();
const events = (g: ServeProcess, name: string) => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === name);
const list = (g: ServeProcess, key: string) => request(g.url, LIST, bearer(key));
/**
 * Status, RateLimit's `r` and `t`, and Retry-After, with `t` and Retry-After as the whole seconds
 * expected on an answer sent within a second of the budget's first request (a second later, one less).
 */
function rated(r: HttpResult): [number, string, number, number | undefined] {
  const [, budget, remaining, t] = /^"([a-z_]+)";r=(\d+);t=(\d+)$/.exec(r.headers.ratelimit as string) ?? [];
  const retry = r.headers['retry-after'] === undefined ? undefined : Number(r.headers['retry-after']);
  return [r.status, `${budget};r=${remaining}`, Number(t), retry];
}
const within = (seconds: number) =>
  ({ asymmetricMatch: (t: unknown) => t === seconds || t === seconds - 1, toAsymmetricMatcher: () => `${seconds - 1} or ${seconds}` }) as unknown as number;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  upstream.handle(emptyStatementList);
  policyFile = path.join(tempDir('agw-rates-'), 'rates.yaml');
  writeFileSync(policyFile, POLICY_TEXT);
}, 30_000);

afterAll(() => stopAll(...running.map((g) => () => g.stop()), () => upstream?.close(), () => redis?.stop()));

describe('RATE_LIMIT_STORE=redis', () => {
  it("holds a key to one budget across the fleet, exactly: the 429s carry the documented body and the RateLimit fields, and the upstream sees only what was allowed", async () => {
    const [a, b] = await Promise.all([serve({ RATE_LIMIT_STORE: 'redis' }), serve({ RATE_LIMIT_STORE: 'redis' })]);
    const { key, id } = await newKey();
    const before = upstream.received.length;
    const allowed = [await list(a, key), await list(b, key), await list(a, key), await list(b, key)];
    // `t`: until the budget is whole while some remain; with none left, until the next request, as a 429 says.
    expect(allowed.map(rated)).toEqual([
      [200, 'default;r=3', within(20), undefined],
      [200, 'default;r=2', within(40), undefined],
      [200, 'default;r=1', within(60), undefined],
      [200, 'default;r=0', within(20), undefined],
    ]);
    expect(allowed[0]!.headers['ratelimit-policy']).toBe('"default";q=4;w=80');
    const refused = [await list(a, key), await list(b, key)];
    for (const r of refused) {
      expect([r.status, r.body.toString(), r.headers['content-type']]).toEqual([429, TOO_MANY, 'application/json; charset=utf-8']);
      const [, state, t, retryAfter] = rated(r);
      expect([state, t]).toEqual(['default;r=0', retryAfter]);
      expect(retryAfter).toEqual(within(20));
    }
    expect(upstream.received.length - before).toBe(4);
    // The budget is one key in Redis, by Redis's clock, gone once whole again.
    const ttl = await redis.client.pttl(`${redis.prefix}rate:${id}:default`);
    expect(ttl).toBeGreaterThan(70_000);
    expect(ttl).toBeLessThanOrEqual(80_000);
    for (const g of [a, b]) {
      await waitFor(async () => metricValue(await metricsText(g), 'acquirer_gateway_rate_limited_total', { route: 'eod_statements_list' }) === 1, { what: 'the refusal counted by route' });
      const line = await waitFor(() => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.status === 429), { what: 'the access line of the 429' });
      expect(line).toMatchObject({ key_id: id, route: 'eod_statements_list', decision: 'rate_limited', code: 'RATE_LIMITED' });
      expect(await metricsText(g)).not.toContain(id);
    }
    // Another key's budget is its own.
    expect((await list(a, (await newKey()).key)).status).toBe(200);
  }, 30_000);

  it('when Redis does not answer: lets the request through and counts it (open), or refuses it 503 (closed)', async () => {
    const own = await startTestRedis();
    let stopped: Promise<void> | undefined;
    const stopOwn = () => (stopped ??= own.stop()); // a second stop would wait for an exit already seen
    try {
      const [open, closed] = await Promise.all([serve({ RATE_LIMIT_STORE: 'redis' }, own), serve({ RATE_LIMIT_STORE: 'redis', RATE_LIMIT_FAIL: 'closed' }, own)]);
      const { key } = await newKey(own);
      // Each has the key cached, which keeps working through an outage (KEY_OUTAGE_GRACE_MS).
      expect([(await list(open, key)).status, (await list(closed, key)).status]).toEqual([200, 200]);
      await stopOwn();
      const through = await list(open, key);
      expect([through.status, through.headers.ratelimit]).toEqual([200, undefined]);
      const refused = await list(closed, key);
      expect([refused.status, refused.body.toString()]).toEqual([503, '{"message":"Service unavailable"}']);
      // One request let through unlimited, counted once: the connection's own failures are counted apart.
      expect(metricValue(await metricsText(open), 'acquirer_gateway_rate_limit_store_errors_total', { context: 'rate limit' })).toBe(1);
      const problem = await waitFor(() => events(open, 'rate_limit_store_problem')[0], { what: 'the rate_limit_store_problem line' });
      expect(problem).toMatchObject({ level: 40, context: 'rate limit' });
      expect(await waitFor(() => closed.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.status === 503), { what: 'the 503 access line' })).toMatchObject({ code: 'RATE_LIMIT_UNAVAILABLE' });
    } finally {
      await stopOwn();
    }
  }, 30_000);
});

describe('RATE_LIMIT_STORE=local', () => {
  it('divides a key\'s burst among the live instances, and gives it back whole when an instance leaves', async () => {
    const [a, b] = await Promise.all([serve({}), serve({})]);
    const instances = async (g: ServeProcess) => metricValue(await metricsText(g), 'acquirer_gateway_rate_limit_instances');
    for (const g of [a, b]) await waitFor(async () => (await instances(g)) === 2, { timeoutMs: 8000, what: 'both instances counted by each' });
    // Announced once the connection was ready: no failure on the way.
    for (const g of [a, b]) {
      expect(events(g, 'rate_limit_store_problem')).toEqual([]);
      expect(metricValue(await metricsText(g), 'acquirer_gateway_rate_limit_store_errors_total', { context: 'instance count' }) ?? 0).toBe(0);
    }
    expect(await redis.client.zcard(`${redis.prefix}instances`)).toBe(2);
    const { key } = await newKey();
    const burst = async (g: ServeProcess) => [await list(g, key), await list(g, key), await list(g, key)].map((r) => r.status);
    // A burst of 4 over two instances: 2 at each, with no Redis call on the way.
    expect(await burst(a)).toEqual([200, 200, 429]);
    expect(await burst(b)).toEqual([200, 200, 429]);
    await b.stop();
    await waitFor(async () => (await instances(a)) === 1, { timeoutMs: 8000, what: 'the instance left counted out' });
    const fresh = await newKey();
    const all = [];
    for (let i = 0; i < 5; i++) all.push((await list(a, fresh.key)).status);
    expect(all).toEqual([200, 200, 200, 200, 429]);
    await a.stop(); // out of the count of the tests after this one
  }, 30_000);

  it('counts each worker of WORKERS=2 as an instance, and the primary shows the count once', async () => {
    const g = await serve({ WORKERS: '2' });
    await waitFor(async () => metricValue(await metricsText(g), 'acquirer_gateway_rate_limit_instances') === 2, { timeoutMs: 8000, what: 'two workers counted' });
    await waitFor(async () => (await redis.client.zcard(`${redis.prefix}instances`)) === 2, { what: 'the two workers in the set' });
    await g.stop();
    // Each worker leaves the set as it stops.
    expect(await redis.client.zcard(`${redis.prefix}instances`)).toBe(0);
  }, 30_000);

  it('leaves the count as it starts draining, not once the drain is over', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '20000' });
    const set = `${redis.prefix}instances`;
    await waitFor(async () => (await redis.client.zcard(set)) === 1, { what: 'the instance announced' });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    upstream.handle((_req, res) => void held.then(() => res.end('{"eod_statements":[]}')));
    try {
      const { key } = await newKey();
      const sent = upstream.received.length;
      const inFlight = list(g, key);
      await waitFor(() => upstream.received.length > sent, { what: 'the request upstream' });
      const stopped = g.stop();
      await waitFor(async () => (await redis.client.zcard(set)) === 0, { what: 'the instance gone from the set while its request is in flight' });
      release();
      expect((await inFlight).status).toBe(200);
      expect(await stopped).toBe(0);
    } finally {
      release();
      upstream.handle(emptyStatementList);
    }
  }, 30_000);

  it('makes no Redis connection for rates while the policy declares none', async () => {
    const plainPolicy = path.join(path.dirname(policyFile), 'plain.yaml');
    writeFileSync(plainPolicy, rateLimitedPolicyText({}));
    const names = async () => ((await redis.client.client('LIST')) as string).split('\n').filter((l) => l.includes('name=acquirer-gateway ')).length;
    const baseline = await names();
    const g = await serve({ POLICY_FILE: plainPolicy });
    // The key store's command connection only (its notices are named apart).
    await waitFor(async () => (await names()) === baseline + 1, { what: "the key store's connection" });
    expect((await metricsText(g)).includes('acquirer_gateway_rate_limit_instances 1')).toBe(false);
    const { key } = await newKey();
    const r = await list(g, key);
    expect([r.status, r.headers.ratelimit]).toEqual([200, undefined]);
    expect(await names()).toBe(baseline + 1);
  }, 30_000);
});

it('refuses a body over the rate with Expect: 100-continue before asking for it: the final answer, never 100', async () => {
  const g = await serve({});
  const { key } = await newKey(redis, ['merchant_users_create']);
  const head = `POST ${USERS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n`;
  for (let i = 0; i < 4; i++) expect(parseRawResponse(await sendRaw(g.port, `${head}\r\n{}`)).status).toBe(200);
  const raw = await sendRaw(g.port, `${head}Expect: 100-continue\r\n\r\n`);
  expect(raw.startsWith('HTTP/1.1 429 ')).toBe(true);
  expect(raw).not.toContain('100 Continue');
  expect(parseRawResponse(raw).body).toBe(TOO_MANY);
}, 30_000);
