import http from 'node:http';
import { createKey, startServe, type ServeProcess } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { metricValue } from '../helpers/metrics.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { stopAll } from '../helpers/stop-all.js';

/** Floods that must not reach Redis once per request, nor grow the metrics. */
let redis: TestRedis;
let upstream: RecordingUpstream;
let gateway: ServeProcess;
let key: string;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  ({ key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] }));
  gateway = await startServe({ ...env, UPSTREAM_URL: upstream.url });
}, 30_000);

afterAll(() =>
  stopAll(
    () => gateway?.stop(),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

/**
 * What the gateway asked Redis so far: its key lookups (as it counts them, since its health checks
 * read too: a GET of the change counter, and a PING, each second whatever the traffic), and every
 * other command Redis served from INFO commandstats but a reconnection's (none is expected of a flood).
 */
async function redisCommands(): Promise<{ lookups: number; others: number }> {
  const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
  const info = await redis.client.info('commandstats');
  let others = 0;
  for (const [, name, count] of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    // A reconnection under load (a health check timed out) sets its name and subscribes again.
    if (!['ping', 'info', 'get', 'client|setname', 'subscribe', 'select'].includes(name!)) others += Number(count);
  }
  return { lookups: metricValue(metrics, 'acquirer_gateway_key_resolutions_total', { layer: 'redis' }) ?? 0, others };
}

const asked = async (before: { lookups: number; others: number }) => {
  const now = await redisCommands();
  return { lookups: now.lookups - before.lookups, others: now.others - before.others };
};

async function flood(count: number, concurrency: number, make: (i: number) => [string, http.OutgoingHttpHeaders]): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const [path, headers] = make(next++);
      statuses.push(
        await new Promise<number>((resolve, reject) => {
          http.get({ host: '127.0.0.1', port: gateway.port, path, headers, agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          }).on('error', reject);
        }),
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return statuses;
}

it('1,000 repetitions of one unknown key reach Redis once (three times at most)', async () => {
  const before = await redisCommands();
  const statuses = await flood(1000, 20, () => ['/v1/acquirer/eod_statements', { authorization: `Bearer acquirer_key_${'F'.repeat(43)}` }]);
  expect(statuses.every((s) => s === 401)).toBe(true);
  // Ideally 1: concurrent misses share a lookup and later ones hit the negative cache (by a margin, if
  // the 10 s negative TTL ran out mid-flood on a slow machine). At least 1: the key was looked up.
  const { lookups, others } = await asked(before);
  expect(lookups).toBeGreaterThanOrEqual(1);
  expect(lookups).toBeLessThanOrEqual(3);
  expect(others).toBe(0);
});

it('1,000 requests with one key reach Redis once, for its first use', async () => {
  const before = await redisCommands();
  const statuses = await flood(1000, 20, () => ['/v1/acquirer/eod_statements', { authorization: `Bearer ${key}` }]);
  expect(statuses.every((s) => s === 200)).toBe(true);
  // Its first use is looked up (the gateway started with an empty cache); the rest are answered from memory.
  expect(await asked(before)).toEqual({ lookups: 1, others: 0 });
});

it('a flood of random paths, methods and keys does not grow the metrics', async () => {
  const series = async () => (await request(gateway.adminUrl, '/metrics')).body.toString().split('\n').filter((l) => l.startsWith('acquirer_gateway_') && !l.startsWith('acquirer_gateway_process') && !l.startsWith('acquirer_gateway_nodejs')).map((l) => l.slice(0, l.lastIndexOf(' ')));
  // Warm-up: one of each kind of answer, so every series the flood may touch exists already.
  await flood(50, 5, (i) => [`/v1/acquirer/random-${i}`, { authorization: i % 2 ? `Bearer ${key}` : `Bearer acquirer_key_${'W'.repeat(43)}` }]);
  const before = new Set(await series());
  await flood(500, 10, (i) => [`/v1/acquirer/${i}/${Math.random().toString(36)}?k=${i}`, { authorization: `Bearer acquirer_key_${String(i).padStart(43, 'R')}` }]);
  await flood(500, 10, (i) => [`/v1/acquirer/other-${i}`, { authorization: `Bearer ${key}` }]);
  const after = new Set(await series());
  expect([...after].filter((s) => !before.has(s))).toEqual([]);
});
