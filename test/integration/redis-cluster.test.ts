import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { metricValue } from '../helpers/metrics.js';
import { request } from '../helpers/http.js';
import { rateLimitedPolicyText } from '../helpers/policy.js';
import { tempDir } from '../helpers/temp-dir.js';
import { disabledWithinASecond, startReadyGateways, keyStoreState, NO_REPLICA, statusOf, underLoad } from '../helpers/failover-load.js';
import { startRedisCluster, type RedisClusterTopology } from '../helpers/redis-cluster-topology.js';
import { adminCall, dataNodeArgs, HOST, key as hostPort, RedisProcesses, type HostPort } from '../helpers/redis-topology.js';
import { stopAll } from '../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * A Redis Cluster on loopback: three primaries with a replica each, an ACL user on every node. Two
 * gateways under load while the primary serving the key store's slot is killed, and then while
 * another is failed over by hand: nothing that should be refused is allowed, they recover with no
 * restart, and a key disabled afterwards is refused by both within a second.
 */
const AUTH = { username: 'gateway', password: 'cluster-node-secret' };
const PREFIX = '{agw-cluster}:';
const PERMISSIONS = ['eod_list', 'eod_read'];

let cluster: RedisClusterTopology;
let upstream: RecordingUpstream;
let env: Record<string, string>;
const gateways: ServeProcess[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster(AUTH);
  upstream = await startUpstream();
  env = {
    REDIS_CLUSTER_NODES: cluster.nodes.map(hostPort).join(','),
    REDIS_USERNAME: AUTH.username,
    REDIS_PASSWORD: AUTH.password,
    REDIS_KEY_PREFIX: PREFIX,
  };
  gateways.push(...(await startReadyGateways(2, { ...env, UPSTREAM_URL: upstream.url })));
}, 90_000);

afterAll(() => stopAll(...gateways.map((g) => () => g.stop()), () => upstream?.close(), () => cluster?.stop()));


it('keys commands work on the Cluster, every key in the prefix\'s slot; the password never shows', async () => {
  const created = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  const shown = await runCli(['keys', 'show', created.id], env);
  expect(shown.code).toBe(0);
  expect(JSON.parse(shown.stdout)).toMatchObject({ id: created.id, acquirer_id: 'acq_1' });
  const listed = await runCli(['keys', 'list', '--acquirer', 'acq_1'], env);
  expect(listed.code).toBe(0);
  expect(listed.stdout).toContain(created.id);
  for (const g of gateways) expect(await statusOf(g, created.key)).toBe(200);
  expect(upstream.received.at(-1)?.headers['x-acquirer-id']).toBe('acq_1');

  // Both gateways are subscribed somewhere in the Cluster: an update is announced with no warning.
  const updated = await runCli(['keys', 'update', created.id, '--permissions', 'eod_list'], env);
  expect(updated).toMatchObject({ code: 0, stderr: '' });

  // A creation is one transaction over the id, the record and the set of ids: one slot, or CROSSSLOT.
  const untagged = await runCli(['keys', 'create', '--acquirer', 'acq_1', '--permissions', 'eod_list'], { ...env, REDIS_KEY_PREFIX: 'agw-cluster:' });
  expect(untagged.code).toBe(2);
  expect(untagged.stderr).toContain('REDIS_KEY_PREFIX: must hold a hash tag in Cluster mode');
  for (const g of gateways) expect(g.logLines.join('\n')).not.toContain(AUTH.password);

  // A wrong password is told as such, and never echoed.
  const refused = await runCli(['keys', 'list'], { ...env, REDIS_PASSWORD: 'not-the-password' });
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^acquirer-gateway: cannot use Redis at cluster via 127\.0\.0\.1:\d+,.*WRONGPASS/);
  expect(refused.stderr).not.toContain('not-the-password');
}, 30_000); // seven CLI runs, each a process start: more than jest's 5 s on a loaded machine

it("rates on the Cluster: the fleet's budget and the live instances, each one key in the prefix's slot", async () => {
  const policyFile = path.join(tempDir('agw-cluster-rates-'), 'rates.yaml');
  writeFileSync(policyFile, rateLimitedPolicyText({ defaultRate: '{ per_second: 0.05, burst: 2 }' }));
  const rated = { ...env, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile };
  // Not in `gateways`: the tests after this one count those.
  const [a, b] = await startReadyGateways(2, { ...rated, RATE_LIMIT_STORE: 'redis' });
  const [local] = await startReadyGateways(1, rated);
  const { key } = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  expect([await statusOf(a!, key), await statusOf(b!, key), await statusOf(a!, key), await statusOf(b!, key)]).toEqual([200, 200, 429, 429]);
  await waitFor(async () => metricValue((await request(local!.adminUrl, '/metrics')).body.toString(), 'acquirer_gateway_rate_limit_instances') === 1, { what: 'the local instance counting itself' });
  expect(metricValue((await request(a!.adminUrl, '/metrics')).body.toString(), 'acquirer_gateway_rate_limit_store_errors_total', { context: 'rate limit' }) ?? 0).toBe(0);
  for (const g of [a!, b!, local!]) await g.stop();
}, 60_000);

it('a node that drops the change-notice connection: the gateways subscribe through another node, and a disable still reaches both within 1 s', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  const subscribersOn = async (at: HostPort) => String(await adminCall(at, AUTH, 'CLIENT', 'LIST', 'TYPE', 'pubsub')).split('\n').filter((line) => line.includes('name=acquirer-gateway:events')).length;
  const before = await Promise.all(cluster.running().map(subscribersOn));
  expect(before.reduce((a, b) => a + b, 0)).toBe(gateways.length);
  for (const at of cluster.running()) await adminCall(at, AUTH, 'CLIENT', 'KILL', 'TYPE', 'pubsub');
  await waitFor(async () => (await Promise.all(cluster.running().map(subscribersOn))).reduce((a, b) => a + b, 0) === gateways.length, { what: 'both gateways subscribed again' });
  for (const g of gateways) await waitFor(async () => (await keyStoreState(g)) === 'ok', { what: 'the gateway hearing notices again' });
  await disabledWithinASecond(gateways, env, key);
});

it('a configured node that is not in the Cluster: notices are heard through a node the Cluster named', async () => {
  const stray = new RedisProcesses('agw-stray-');
  let g: ServeProcess | undefined;
  try {
    const port = await stray.start('redis-server', (p) => ['--port', String(p), '--dir', stray.dir, ...dataNodeArgs(AUTH)]);
    g = await startServe({ ...env, REDIS_CLUSTER_NODES: [`${HOST}:${port}`, ...cluster.nodes.map(hostPort)].join(','), UPSTREAM_URL: upstream.url });
    const gateway = g;
    await waitFor(async () => (await keyStoreState(gateway)) === 'ok', { what: 'the gateway ready' });
    const key = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
    expect(await statusOf(gateway, key.key)).toBe(200);
    expect(await runCli(['keys', 'disable', key.id], env)).toMatchObject({ code: 0, stderr: '' });
    await waitFor(async () => (await statusOf(gateway, key.key)) === 401, { timeoutMs: 1_000, what: 'the disable refused within 1 s' });
  } finally {
    await g?.stop();
    await stray.stop();
  }
});

// Failed over by hand first: the old primary stays on as the replica the kill needs after it. A
// failover by hand loses nothing, so /readyz may never see it; a kill it must. After the kill the
// promoted replica has none of its own, and `keys disable` says so.
it.each([
  ['failed over by hand', false, '', async () => void (await cluster.failoverSlotOwner(`${PREFIX}ids`))],
  ['killed', true, NO_REPLICA, async (owner: HostPort) => cluster.killNode(owner)],
])('the store slot\'s primary %s under load: nothing refused is allowed, recovery with no restart, a later disable reaches both within 1 s', async (_how, seenByReadiness, disableSays, failOver) => {
  const valid = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  const disabledBefore = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  const disabledAfter = await createKey(env, { acquirer: 'acq_1', permissions: PERMISSIONS });
  expect((await runCli(['keys', 'disable', disabledBefore.id], env)).code).toBe(0);
  for (const g of gateways) {
    expect([await statusOf(g, valid.key), await statusOf(g, disabledBefore.key), await statusOf(g, disabledAfter.key)]).toEqual([200, 401, 200]);
  }

  const seen = await underLoad(gateways, { valid: valid.key, disabled: disabledBefore.key }, async () => {
    const owner = await cluster.ownerOf(`${PREFIX}ids`);
    await failOver(owner);
    await cluster.waitForOwnerChange(`${PREFIX}ids`, owner, 30_000);
  });
  expect(seen.disabledAllowed).toBe(0);
  if (seenByReadiness) expect(seen.readiness.has('unavailable') || seen.readiness.has('no_change_notices')).toBe(true);
  expect([...seen.validStatuses].every((s) => s === 200 || s === 503)).toBe(true);
  expect([...seen.readiness].every((s) => ['ok', 'no_change_notices', 'unavailable'].includes(s))).toBe(true);
  for (const g of gateways) expect(await statusOf(g, disabledBefore.key)).toBe(401);

  await disabledWithinASecond(gateways, env, disabledAfter, disableSays);
}, 120_000);
