import { createKey, runCli, type ServeProcess } from '../helpers/cli.js';
import { disabledWithinASecond, startReadyGateways, NO_REPLICA, statusOf, underLoad } from '../helpers/failover-load.js';
import { startSentinelTopology, type SentinelTopology } from '../helpers/redis-sentinel-topology.js';
import { key as hostPort } from '../helpers/redis-topology.js';
import { stopAll } from '../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';

/**
 * Redis through Sentinel, on loopback: a primary, a replica and three Sentinels, with an ACL user on
 * the data nodes and a password on the Sentinels. Two gateways under load while the primary is
 * failed over by hand, then killed: nothing that should be refused is allowed, they recover with no restart, and a key
 * disabled after the failover is refused by both within a second.
 */
const AUTH = { username: 'gateway', password: 'data-node-secret', sentinelPassword: 'sentinel-secret' };

let topology: SentinelTopology;
let upstream: RecordingUpstream;
let env: Record<string, string>;
const gateways: ServeProcess[] = [];

beforeAll(async () => {
  topology = await startSentinelTopology(AUTH);
  upstream = await startUpstream();
  env = {
    REDIS_SENTINELS: topology.sentinels.map(hostPort).join(','),
    REDIS_SENTINEL_NAME: topology.name,
    REDIS_USERNAME: AUTH.username,
    REDIS_PASSWORD: AUTH.password,
    REDIS_SENTINEL_PASSWORD: AUTH.sentinelPassword,
    REDIS_KEY_PREFIX: 'agw-sentinel:',
  };
  gateways.push(...(await startReadyGateways(2, { ...env, UPSTREAM_URL: upstream.url })));
}, 60_000);

afterAll(() => stopAll(...gateways.map((g) => () => g.stop()), () => upstream?.close(), () => topology?.stop()));


it('keys commands work through the Sentinels; the secrets never show', async () => {
  const created = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  const shown = await runCli(['keys', 'show', created.id], env);
  expect(shown.code).toBe(0);
  expect(JSON.parse(shown.stdout)).toMatchObject({ id: created.id, acquirer_id: 'acq_1' });
  for (const g of gateways) expect(await statusOf(g, created.key)).toBe(200);
  for (const g of gateways) expect(g.logLines.join('\n')).not.toMatch(/data-node-secret|sentinel-secret/);
});

// Failed over by hand first (the old primary stays, as the new one's replica, for the kill after it).
// SENTINEL FAILOVER leaves the old primary a writable master for about 10 s: gateways must leave it
// when the Sentinels announce the switch, not when it is demoted; the new primary has no replica
// until then, which `keys disable` may say. A kill must be seen by /readyz, and leaves no replica.
it.each([
  ['failed over by hand', false, new RegExp(`^$|${NO_REPLICA.source}`), () => topology.failover()],
  ['killed', true, NO_REPLICA, async () => {
    await topology.waitForReplica();
    await topology.killPrimary();
  }],
])('the primary %s under load: nothing refused is allowed, recovery with no restart, a later disable reaches both gateways within 1 s', async (_how, seenByReadiness, disableSays, failOver) => {
  const valid = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  const disabledBefore = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  const disabledAfter = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  expect((await runCli(['keys', 'disable', disabledBefore.id], env)).code).toBe(0);
  for (const g of gateways) {
    expect([await statusOf(g, valid.key), await statusOf(g, disabledBefore.key), await statusOf(g, disabledAfter.key)]).toEqual([200, 401, 200]);
  }

  const seen = await underLoad(gateways, { valid: valid.key, disabled: disabledBefore.key }, async () => {
    const old = await topology.primary();
    await failOver();
    await topology.waitForNewPrimary(old, 30_000);
  });
  expect(seen.disabledAllowed).toBe(0);
  // The load saw the failover: readiness said what it waited for (lookups, or change notices).
  if (seenByReadiness) expect(seen.readiness.has('unavailable') || seen.readiness.has('no_change_notices')).toBe(true);
  expect([...seen.validStatuses].every((s) => s === 200 || s === 503)).toBe(true);
  expect([...seen.readiness].every((s) => ['ok', 'no_change_notices', 'unavailable'].includes(s))).toBe(true);
  for (const g of gateways) expect(await statusOf(g, disabledBefore.key)).toBe(401);

  // Cached on both, then disabled through the new primary.
  await disabledWithinASecond(gateways, env, disabledAfter, disableSays);
}, 120_000);
