import nock from 'nock';
import request from 'supertest';
import { compileAllowlist } from '../../../src/net/ip-allowlist.js';
import { LocalRateLimiter } from '../../../src/limits/local-rate-limiter.js';
import type { RateLimiter } from '../../../src/limits/rate-limiter.js';
import { parsePolicy } from '../../../src/policy/load.js';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { rateLimitedPolicyText, STATEMENT_ID } from '../../helpers/policy.js';

/** The pipeline's rate step through the real app: a nock upstream, budgets in the process on a hand-moved clock. */
const UPSTREAM = 'http://statements.test';
const LIST = '/v1/acquirer/eod_statements';
const CSV = `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`;
const TOO_MANY = '{"message":"Too many requests"}';

function policyOf(text: string): CompiledPolicy {
  const result = parsePolicy(text, 'rates.yaml');
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.policy;
}
/** Two at once, then one every 10 s: the test's requests never see the budget refill. */
const POLICY = policyOf(rateLimitedPolicyText({ defaultRate: '{ per_second: 0.1, burst: 2 }', downloadRate: '{ per_second: 0.1, burst: 1 }' }));

let now = 0;
let t: TestApp;
let key: string;

async function appWith(rateLimiter: RateLimiter, rateLimitFailClosed = false): Promise<void> {
  t = await createTestApp({ upstreamUrl: UPSTREAM, policy: POLICY, rateLimiter, rateLimitFailClosed, trustedProxies: compileAllowlist(['127.0.0.1/32', '::ffff:127.0.0.1/128']) });
  ({ key } = await t.addKey({ acquirer_id: 'acq_1', allowed_ips: ['127.0.0.1/32'] }));
}

beforeAll(() => {
  nock.disableNetConnect();
  nock.enableNetConnect(/127\.0\.0\.1|localhost|\[::1\]|^::1:/);
});
afterAll(() => {
  nock.enableNetConnect();
  nock.restore();
});
beforeEach(() => appWith(new LocalRateLimiter({ instances: () => 1, now: () => now })));
afterEach(() => {
  t.close();
  const pending = nock.pendingMocks();
  nock.cleanAll();
  expect(pending).toEqual([]);
});

const get = (path: string, as = key) => request(t.app).get(path).set('Authorization', `Bearer ${as}`);
const listed = (times = 1) => nock(UPSTREAM).get(LIST).times(times).reply(200, '{"eod_statements":[]}', { 'content-type': 'application/json', ratelimit: '"upstream";r=9;t=1' });

it('answers a key over its rate 429 with the documented body, Retry-After and the RateLimit fields, and sends nothing upstream', async () => {
  listed(2);
  expect((await get(LIST)).status).toBe(200);
  expect((await get(LIST)).status).toBe(200);
  const res = await get(LIST);
  expect(res.status).toBe(429);
  expect(res.text).toBe(TOO_MANY);
  expect(res.headers).toMatchObject({
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(TOO_MANY.length),
    'retry-after': '10',
    ratelimit: '"default";r=0;t=10',
    'ratelimit-policy': '"default";q=2;w=20',
  });
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
});

it("tells an allowed answer what is left, in place of any RateLimit field of the upstream's", async () => {
  listed();
  const res = await get(LIST);
  expect(res.status).toBe(200);
  expect(res.headers.ratelimit).toBe('"default";r=1;t=10');
  expect(res.headers['ratelimit-policy']).toBe('"default";q=2;w=20');
});

it("counts a route with a rate of its own apart from the key's default budget", async () => {
  nock(UPSTREAM).get(CSV).reply(200, 'a,b\r\n', { 'content-type': 'text/csv' });
  listed(2);
  expect((await get(CSV)).status).toBe(200);
  const second = await get(CSV);
  expect([second.status, second.headers.ratelimit]).toEqual([429, '"eod_statement_download";r=0;t=10']);
  expect([(await get(LIST)).status, (await get(LIST)).status, (await get(LIST)).status]).toEqual([200, 200, 429]);
});

it("holds each key to its own budget: one key's flood leaves another's whole", async () => {
  listed(3);
  const { key: other } = await t.addKey({ acquirer_id: 'acq_1' });
  await get(LIST);
  await get(LIST);
  expect((await get(LIST)).status).toBe(429);
  expect((await get(LIST, other)).status).toBe(200);
});

it('takes nothing from the budget for a request refused before it: an address outside the whitelist, a missing permission, a bad query', async () => {
  const { key: noList } = await t.addKey({ acquirer_id: 'acq_1', permissions: ['merchants_read'] });
  for (let i = 0; i < 3; i++) {
    expect((await get(LIST).set('X-Forwarded-For', '203.0.113.7')).status).toBe(401);
    expect((await get(`${LIST}?page=x`)).status).toBe(400);
    expect((await get(LIST, noList)).status).toBe(403);
  }
  listed(2);
  expect([(await get(LIST)).status, (await get(LIST)).status]).toEqual([200, 200]);
});

it("gives the catalogue, which the gateway answers itself, the key's RateLimit fields too", async () => {
  const res = await get('/v1/acquirer/api_keys/permissions');
  expect(res.status).toBe(200);
  expect(res.headers.ratelimit).toBe('"default";r=1;t=10');
});

describe('when the store cannot be asked', () => {
  const unavailable: RateLimiter = { take: async () => 'unavailable' as const, close: async () => {} };

  it('lets the request through without RateLimit fields (RATE_LIMIT_FAIL=open)', async () => {
    t.close();
    await appWith(unavailable);
    listed();
    const res = await get(LIST);
    expect(res.status).toBe(200);
    expect(res.headers.ratelimit).toBeUndefined();
  });

  it('refuses it 503 with the documented body, and sends nothing upstream (RATE_LIMIT_FAIL=closed)', async () => {
    t.close();
    await appWith(unavailable, true);
    const res = await get(LIST);
    expect([res.status, res.text]).toEqual([503, '{"message":"Service unavailable"}']);
  });

  it('answers 500 when the store itself fails (a fault, never a pass)', async () => {
    t.close();
    await appWith({ take: async () => Promise.reject(new Error('boom')), close: async () => {} });
    const res = await get(LIST);
    expect([res.status, res.text]).toEqual([500, '{"message":"Internal server error"}']);
  });
});
