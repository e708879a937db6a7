import { runCli, startServe, type CliResult, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { startRedisCluster, type RedisClusterTopology } from '../helpers/redis-cluster-topology.js';
import { makeRedisTls, type RedisTls } from '../helpers/redis-tls.js';
import { startSentinelTopology, type SentinelTopology } from '../helpers/redis-sentinel-topology.js';
import { HOST, RedisProcesses, dataNodeArgs, key as hostPort } from '../helpers/redis-topology.js';
import { stopAll } from '../helpers/stop-all.js';
import { headerValues, startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The key store over TLS with an ACL user, on loopback: redis-server and redis-sentinel listening
 * with TLS only (no plain port), their certificate signed by a CA made for this file and trusted
 * through REDIS_TLS_CA_FILE. In URL mode (`rediss://`), in Sentinel mode (REDIS_TLS, the Sentinels
 * and the data nodes both over TLS) and in Cluster mode (REDIS_TLS, every node over TLS, the cluster
 * bus too): keys made by the CLI are served and a disable is refused within a second; a certificate
 * that is not trusted leaves the store unavailable, and the log says why. No password ever shows.
 */
const LIST = '/v1/acquirer/eod_statements';
const USERNAME = 'gateway';
const PASSWORD = 'tls-data-node-secret';
const SENTINEL_PASSWORD = 'tls-sentinel-secret';
const SECRETS = /tls-data-node-secret|tls-sentinel-secret/;
const PERMISSIONS = ['eod_list', 'eod_read'];

let certificatesMade: Promise<RedisTls> | undefined;
/** The CA and server certificate of this file, made by the first describe (a missing openssl fails each with its message). */
const certificates = () => (certificatesMade ??= makeRedisTls());
let upstream: RecordingUpstream;
const gateways: ServeProcess[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
});

afterAll(() => stopAll(() => upstream?.close()));

/** The gateways started so far, then `more` (the Redis they use): for each describe's afterAll. */
const stopGatewaysThen = (...more: (() => unknown)[]) => stopAll(...gateways.splice(0).map((g) => () => g.stop()), ...more);

async function serve(env: Record<string, string>): Promise<ServeProcess> {
  const gateway = await startServe({ ...env, UPSTREAM_URL: upstream.url });
  gateways.push(gateway);
  return gateway;
}

const readiness = async (g: ServeProcess) => {
  const { status, body } = await request(g.adminUrl, '/readyz');
  return { status, keyStore: (JSON.parse(body.toString()) as { checks: { key_store: string } }).checks.key_store };
};

/** Ready, and subscribed to change notices (a disable then reaches it at once). */
const ready = (g: ServeProcess) =>
  waitFor(async () => {
    const { status, keyStore } = await readiness(g);
    return status === 200 && keyStore === 'ok';
  }, { timeoutMs: 10_000, what: 'the gateway ready, its key store ok' });

/** Everything a user of the CLI sees. */
const printed = (result: CliResult) => result.stdout + result.stderr;

/** `keys create` with its output checked: it worked, and printed no password. */
async function createKey(env: Record<string, string>, acquirer: string): Promise<{ id: string; key: string }> {
  const created = await runCli(['keys', 'create', '--acquirer', acquirer, '--permissions', PERMISSIONS.join(',')], env);
  expect(printed(created)).not.toMatch(SECRETS);
  expect(created).toMatchObject({ code: 0 });
  return JSON.parse(created.stdout) as { id: string; key: string };
}

/**
 * Served with its acquirer at the upstream; disabled through the CLI, refused within 1 s; and no
 * password in what the CLI printed or the gateway logged.
 */
async function servedThenRefusedWithin1s(gateway: ServeProcess, env: Record<string, string>, acquirer: string): Promise<void> {
  const created = await createKey(env, acquirer);
  const shown = await runCli(['keys', 'show', created.id], env);
  expect(shown.code).toBe(0);
  expect(JSON.parse(shown.stdout)).toMatchObject({ id: created.id, acquirer_id: acquirer });

  const before = upstream.received.length;
  const served = await request(gateway.url, LIST, bearer(created.key));
  expect(served.status).toBe(200);
  expect(upstream.received).toHaveLength(before + 1);
  expect(headerValues(upstream.received[before]!.rawHeaders, 'x-acquirer-id')).toEqual([acquirer]);

  const disabled = await runCli(['keys', 'disable', created.id], env);
  expect(disabled).toMatchObject({ code: 0, stderr: '' });
  const disabledAt = Date.now();
  await waitFor(async () => (await request(gateway.url, LIST, bearer(created.key))).status === 401, { timeoutMs: 1_000, what: 'the disabled key refused within 1 s' });
  expect(Date.now() - disabledAt).toBeLessThan(1_000);
  expect(upstream.received).toHaveLength(before + 1);

  for (const output of [shown, disabled].map(printed)) expect(output).not.toMatch(SECRETS);
  expect(gateway.logLines.join('\n') + gateway.stderr()).not.toMatch(SECRETS);
}

describe('REDIS_URL rediss:// with REDIS_TLS_CA_FILE and an ACL user', () => {
  let processes: RedisProcesses;
  let env: Record<string, string>;

  beforeAll(async () => {
    const tls = await certificates();
    processes = new RedisProcesses('agw-redis-tls-', tls.client);
    const port = await processes.start('redis-server', (port) => [
      ...tls.serverArgs(port), '--dir', processes.dir, ...dataNodeArgs({ username: USERNAME, password: PASSWORD }),
    ]);
    env = {
      REDIS_URL: `rediss://${HOST}:${port}`,
      REDIS_TLS_CA_FILE: tls.caFile,
      REDIS_USERNAME: USERNAME,
      REDIS_PASSWORD: PASSWORD,
      REDIS_KEY_PREFIX: 'agw-tls-url:',
    };
  }, 30_000);

  afterAll(() => stopGatewaysThen(() => processes?.stop()));

  it('keys commands and the gateway work over TLS; a disable is refused within 1 s; the password never shows', async () => {
    const gateway = await serve(env);
    await ready(gateway);
    await servedThenRefusedWithin1s(gateway, env, 'acq_tls_url');
  }, 30_000);

  it('a certificate not trusted (no REDIS_TLS_CA_FILE) leaves the key store unavailable: 503, and the log says why', async () => {
    const created = await createKey(env, 'acq_tls_untrusted');
    const { REDIS_TLS_CA_FILE: _trusted, ...untrusting } = env;
    const gateway = await serve(untrusting);

    const problem = await waitFor(
      () => gateway.logLines.map((line) => JSON.parse(line) as { event?: string; context?: string; err?: { message?: string } }).find((entry) => entry.event === 'key_store_problem'),
      { timeoutMs: 10_000, what: 'the gateway to log why the key store is unavailable' },
    );
    expect(problem.err?.message).toMatch(/certificate/i);
    expect(await readiness(gateway)).toEqual({ status: 503, keyStore: 'unavailable' });
    const before = upstream.received.length;
    expect((await request(gateway.url, LIST, bearer(created.key))).status).toBe(503);
    expect(upstream.received).toHaveLength(before);
    expect(gateway.logLines.join('\n') + gateway.stderr()).not.toMatch(SECRETS);
  }, 30_000);
});

describe('Sentinel mode with REDIS_TLS: the Sentinels and the data nodes over TLS', () => {
  let topology: SentinelTopology;
  let env: Record<string, string>;

  beforeAll(async () => {
    const tls = await certificates();
    topology = await startSentinelTopology({ username: USERNAME, password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD, tls });
    env = {
      REDIS_SENTINELS: topology.sentinels.map(hostPort).join(','),
      REDIS_SENTINEL_NAME: topology.name,
      REDIS_TLS: 'true',
      REDIS_TLS_CA_FILE: tls.caFile,
      REDIS_USERNAME: USERNAME,
      REDIS_PASSWORD: PASSWORD,
      REDIS_SENTINEL_PASSWORD: SENTINEL_PASSWORD,
      REDIS_KEY_PREFIX: 'agw-tls-sentinel:',
    };
  }, 60_000);

  afterAll(() => stopGatewaysThen(() => topology?.stop()));

  it('keys commands and the gateway work through the Sentinels over TLS; a disable is refused within 1 s; the passwords never show', async () => {
    const gateway = await serve(env);
    await ready(gateway);
    await servedThenRefusedWithin1s(gateway, env, 'acq_tls_sentinel');
  }, 30_000);
});

describe('Cluster mode with REDIS_TLS: every node over TLS, the cluster bus and replication too', () => {
  let cluster: RedisClusterTopology;
  let env: Record<string, string>;

  beforeAll(async () => {
    const tls = await certificates();
    cluster = await startRedisCluster({ username: USERNAME, password: PASSWORD, tls });
    env = {
      REDIS_CLUSTER_NODES: cluster.nodes.map(hostPort).join(','),
      REDIS_TLS: 'true',
      REDIS_TLS_CA_FILE: tls.caFile,
      REDIS_USERNAME: USERNAME,
      REDIS_PASSWORD: PASSWORD,
      REDIS_KEY_PREFIX: '{agw-tls}:',
    };
  }, 60_000);

  afterAll(() => stopGatewaysThen(() => cluster?.stop()));

  it('keys commands and the gateway work on the Cluster over TLS; a disable is refused within 1 s; the password never shows', async () => {
    const gateway = await serve(env);
    await ready(gateway);
    await servedThenRefusedWithin1s(gateway, env, 'acq_tls_cluster');
  }, 30_000);
});
