import { createKey, runCli } from '../helpers/cli.js';
import { adminCall, dataNodeArgs, HOST, RedisProcesses, requireBinary } from '../helpers/redis-topology.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `keys update` and `keys disable` ask for a replica's confirmation of what they wrote (WAIT): a
 * change only the primary holds is lost with it. A primary and a replica on loopback; the replica
 * frozen (SIGSTOP) to make it miss the confirmation.
 */
const NOT_CONFIRMED = /^acquirer-gateway: the change is written on the primary, and no replica confirmed it within 1 s: if the primary fails now it may be lost with it\. Run the command again after a failover\.$/m;

let processes: RedisProcesses;
let primary: number;
let replica: number;
let env: Record<string, string>;

beforeAll(async () => {
  requireBinary('redis-server', 'redis-server');
  processes = new RedisProcesses('agw-replica-');
  primary = await processes.start('redis-server', (port) => ['--port', String(port), '--dir', processes.dir, ...dataNodeArgs({})]);
  replica = await processes.start('redis-server', (port) => ['--port', String(port), '--dir', processes.dir, ...dataNodeArgs({}), '--replicaof', HOST, String(primary)]);
  await waitFor(async () => ((await adminCall({ host: HOST, port: replica }, {}, 'ROLE')) as unknown[])[3] === 'connected', { what: 'the replica in sync' });
  env = { REDIS_URL: `redis://${HOST}:${primary}`, REDIS_KEY_PREFIX: 'agw-replica:' };
}, 30_000);

afterAll(() => processes?.stop());

it('says nothing of replication when a replica confirmed the change', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list'] });
  const disabled = await runCli(['keys', 'disable', key.id], env);
  expect(disabled.code).toBe(0);
  expect(disabled.stderr).not.toMatch(/replica/);
});

it('warns, and still exits 0, when no replica confirms the change within a second; the change is written', async () => {
  const key = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list'] });
  processes.freeze(replica, true);
  try {
    const updated = await runCli(['keys', 'update', key.id, '--permissions', 'eod_list,eod_read'], env);
    expect(updated.code).toBe(0);
    expect(updated.stderr).toMatch(NOT_CONFIRMED);
    const disabled = await runCli(['keys', 'disable', key.id], env);
    expect(disabled.code).toBe(0);
    expect(disabled.stderr).toMatch(NOT_CONFIRMED);
  } finally {
    processes.freeze(replica, false);
  }
  const shown = JSON.parse((await runCli(['keys', 'show', key.id], env)).stdout);
  expect(shown).toMatchObject({ permissions: ['eod_list', 'eod_read'], disabled_at: expect.any(String) });
});

it('says it cannot tell when the user may not ask (ROLE refused), and still exits 0', async () => {
  await adminCall({ host: HOST, port: primary }, {}, 'ACL', 'SETUSER', 'no-role', 'on', '>pw', '~*', '&*', '+@all', '-role');
  const asUser = { ...env, REDIS_USERNAME: 'no-role', REDIS_PASSWORD: 'pw' };
  const key = await createKey(asUser, { acquirer: 'acq_1', permissions: ['eod_list'] });
  const disabled = await runCli(['keys', 'disable', key.id], asUser);
  expect(disabled.code).toBe(0);
  expect(disabled.stderr).toMatch(/^acquirer-gateway: the change is written, and whether a replica holds it could not be asked with ROLE and WAIT: NOPERM .*'role'/m);
  expect(disabled.stderr).not.toContain('pw');
});
