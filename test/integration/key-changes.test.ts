import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { startTestRedis, type TestRedis, waitForSubscribers } from '../helpers/redis.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';

/**
 * Two gateways share one Redis; a change made with the CLI reaches both by its change notice. Their
 * cached copies are trusted for a minute (KEY_CACHE_TTL_MS), so within the deadline below only the
 * notice can explain the change; how fast it arrives is the benchmark's to measure ("disabled key
 * under load"), not a test's.
 */
const LIST = '/v1/acquirer/eod_statements';
const NOTICE_DEADLINE_MS = 4_000; // under the test's own 5 s, far under the minute

let redis: TestRedis;
let upstream: RecordingUpstream;
let gateways: ServeProcess[];
let env: Record<string, string>;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  gateways = await Promise.all([1, 2].map(() => startServe({ ...env, UPSTREAM_URL: upstream.url })));
  // Both must be subscribed before a change is published, or the test proves nothing.
  await waitForSubscribers(redis, 2);
}, 30_000);

afterAll(() =>
  stopAll(
    () => Promise.all(gateways.map((g) => g.stop())),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

async function statuses(key: string): Promise<number[]> {
  return Promise.all(gateways.map(async (g) => (await request(g.url, LIST, bearer(key))).status));
}

/** Polls both gateways until each answers `status`, well before their cached copies would expire. */
async function expectEverywhere(key: string, status: number): Promise<void> {
  await waitFor(async () => (await statuses(key)).every((s) => s === status), {
    timeoutMs: NOTICE_DEADLINE_MS,
    intervalMs: 20,
    what: `every gateway to answer ${status}`,
  });
}

it('a disabled key is refused by every instance at its notice, and stays disabled', async () => {
  const { id, key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect(await statuses(key)).toEqual([200, 200]); // now cached in both
  const disabled = await runCli(['keys', 'disable', id], env);
  expect(disabled.code).toBe(0);
  expect(JSON.parse(disabled.stdout)).toMatchObject({ id, disabled_at: expect.stringMatching(/Z$/) });
  await expectEverywhere(key, 401);
  // Each instance timed the notice from its publication to its cache dropping it.
  for (const g of gateways) {
    const text = (await request(g.adminUrl, '/metrics')).body.toString();
    const count = Number(/^acquirer_gateway_key_change_propagation_seconds_count (\d+)$/m.exec(text)?.[1]);
    const sum = Number(/^acquirer_gateway_key_change_propagation_seconds_sum (\S+)$/m.exec(text)?.[1]);
    expect(count).toBeGreaterThanOrEqual(1);
    expect(sum / count).toBeLessThan(NOTICE_DEADLINE_MS / 1000);
  }

  const update = await runCli(['keys', 'update', id, '--permissions', 'eod_list,eod_read'], env);
  expect(update.code).toBe(1);
  expect(update.stderr).toMatch(/disabled; disabling is permanent/);
  expect(await statuses(key)).toEqual([401, 401]);
});

it('disabling again announces again, so a retry after a lost notice still reaches every gateway', async () => {
  const { id, key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect(await statuses(key)).toEqual([200, 200]);
  // As if a disable had been written but its notice lost: the record says disabled, nobody was told.
  const recordKey = `${redis.prefix}key:${(await redis.client.get(`${redis.prefix}id:${id}`))!}`;
  const record = JSON.parse((await redis.client.get(recordKey))!);
  await redis.client.set(recordKey, JSON.stringify({ ...record, disabled_at: '2026-01-01T00:00:00.000Z' }));
  expect(await statuses(key)).toEqual([200, 200]); // cached, and no notice
  expect((await runCli(['keys', 'disable', id], env)).code).toBe(0);
  await expectEverywhere(key, 401);
});

it('an updated key is judged by its new permissions and whitelist at its notice', async () => {
  const { id, key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect(await statuses(key)).toEqual([200, 200]);

  expect((await runCli(['keys', 'update', id, '--permissions', 'eod_list'], env)).code).toBe(0);
  await expectEverywhere(key, 403);

  expect((await runCli(['keys', 'update', id, '--permissions', 'eod_list,eod_read', '--allow-ip', '192.0.2.0/24'], env)).code).toBe(0);
  await expectEverywhere(key, 401);

  expect((await runCli(['keys', 'update', id, '--allow-ip', '127.0.0.0/8'], env)).code).toBe(0);
  await expectEverywhere(key, 200);

  expect((await runCli(['keys', 'update', id, '--allow-ip', '192.0.2.0/24'], env)).code).toBe(0);
  await expectEverywhere(key, 401);
  expect((await runCli(['keys', 'update', id, '--allow-any-ip'], env)).code).toBe(0);
  await expectEverywhere(key, 200);

  const shown = await runCli(['keys', 'show', id], env);
  expect(JSON.parse(shown.stdout)).toMatchObject({ id, permissions: ['eod_list', 'eod_read'], allowed_ips: [], disabled_at: null });
  // Seven CLI processes, each a Node start-up: on two busy cores that alone can pass jest's 5 s.
}, 20_000);

it('a change whose notice was lost is caught by the change counter: refused within two health checks, and said so', async () => {
  const { id, key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect(await statuses(key)).toEqual([200, 200]); // now cached in both, for a minute
  // A disable written as `keys disable` writes it (the record, then the counter), whose notice never arrives.
  const hash = await redis.client.get(`${redis.prefix}id:${id}`);
  const record = JSON.parse((await redis.client.get(`${redis.prefix}key:${hash}`))!);
  await redis.client.set(`${redis.prefix}key:${hash}`, JSON.stringify({ ...record, disabled_at: new Date().toISOString() }));
  await redis.client.incr(`${redis.prefix}version`);
  const writtenAt = Date.now();
  await waitFor(async () => (await statuses(key)).every((s) => s === 401), { timeoutMs: 2_500, intervalMs: 20, what: 'every gateway to refuse the key' });
  expect(Date.now() - writtenAt).toBeLessThan(2_500); // health checks every second; far under the minute of the cache
  for (const g of gateways) {
    await waitFor(() => g.logLines.some((line) => line.includes('"event":"key_store_problem"') && line.includes('"context":"key change counter"')), { what: 'the lost notice logged' });
  }
});
