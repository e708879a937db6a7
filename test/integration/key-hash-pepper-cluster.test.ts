import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { startRedisCluster, type RedisClusterTopology } from '../helpers/redis-cluster-topology.js';
import { key as hostPort } from '../helpers/redis-topology.js';
import { stopAll } from '../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * KEY_HASH_PEPPER on a Redis Cluster: a lookup reads both forms of a key's record in one round trip,
 * and `keys rehash` moves each in one script; both need the two names in one slot, which the
 * prefix's hash tag gives them.
 */
const LIST = '/v1/acquirer/eod_statements';
const AUTH = { username: 'gateway', password: 'cluster-node-secret' };
const PEPPER = 'cluster-pepper-0123456789-abcdefghijklmn';
const PERMISSIONS = ['eod_list', 'eod_read'];

let cluster: RedisClusterTopology;
let upstream: RecordingUpstream;
let gateway: ServeProcess;
let env: Record<string, string>;

beforeAll(async () => {
  cluster = await startRedisCluster(AUTH);
  upstream = await startUpstream();
  env = { REDIS_CLUSTER_NODES: cluster.nodes.map(hostPort).join(','), REDIS_USERNAME: AUTH.username, REDIS_PASSWORD: AUTH.password, REDIS_KEY_PREFIX: '{agw-pepper}:' };
  gateway = await startServe({ ...env, KEY_HASH_PEPPER: PEPPER, UPSTREAM_URL: upstream.url });
  await waitFor(async () => JSON.parse((await request(gateway.adminUrl, '/readyz')).body.toString()).checks.key_store === 'ok', { what: 'the gateway ready, with notices' });
}, 90_000);

afterAll(() => stopAll(() => gateway?.stop(), () => upstream?.close(), () => cluster?.stop()));

const statusOf = async (key: string) => (await request(gateway.url, LIST, { authorization: `Bearer ${key}` })).status;

it('serves plain and peppered keys, moves the plain ones, and refuses a disabled one within 1 s', async () => {
  const before = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  expect(await statusOf(before.key)).toBe(200);
  const rehash = await runCli(['keys', 'rehash'], { ...env, KEY_HASH_PEPPER: PEPPER });
  expect(rehash.code).toBe(0);
  expect(JSON.parse(rehash.stdout)).toEqual({ migrated: 1, already_peppered: 0, unreadable: 0 });
  const after = await createKey({ ...env, KEY_HASH_PEPPER: PEPPER }, { acquirer: 'acq_1', permissions: PERMISSIONS });
  for (const { key } of [before, after]) expect(await statusOf(key)).toBe(200);
  const disabled = await runCli(['keys', 'disable', before.id], env);
  expect(disabled.code).toBe(0);
  await waitFor(async () => (await statusOf(before.key)) === 401, { timeoutMs: 1_000, intervalMs: 20, what: 'the disabled key refused' });
  expect(await statusOf(after.key)).toBe(200);
  expect(gateway.logLines.join('\n') + rehash.stdout + rehash.stderr).not.toContain(PEPPER);
});
