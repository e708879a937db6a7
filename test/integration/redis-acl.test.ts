import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { rateLimitedPolicyText } from '../helpers/policy.js';
import { startTestRedis, type TestRedis, waitForSubscribers } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { tempDir } from '../helpers/temp-dir.js';
import { emptyStatementList, startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The two ACL users docs/operations.md gives ("Redis users with the least they need"), run as
 * written there with this file's prefix: every command the gateway and the `keys` commands send must
 * be one the user may send, which Redis's ACL LOG shows.
 */
const LIST = '/v1/acquirer/eod_statements';
const TOO_MANY = '{"message":"Too many requests"}';
const PASSWORDS = { GATEWAY_PASSWORD: 'gateway-pw-1', ADMIN_PASSWORD: 'admin-pw-1' } as const;

/** The ACL SETUSER lines of the docs, for `prefix` and the passwords above, as arguments. */
function documentedUsers(prefix: string): string[][] {
  const section = readFileSync('docs/operations.md', 'utf8').split('### Redis users with the least they need')[1]!;
  const block = /```text\n([\s\S]*?)```/.exec(section)![1]!;
  return block
    .trim()
    .split('\n')
    .map((line) => line.replaceAll('acquirer-gateway:', prefix).replace(/>(\w+_PASSWORD)/, (_, name: keyof typeof PASSWORDS) => `>${PASSWORDS[name]}`).split(' ').slice(2));
}

let redis: TestRedis;
let upstream: RecordingUpstream;
let policyFile: string;
let admin: Record<string, string>;
const gateways: ServeProcess[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  // ACL users are made on this Redis: it must be the throwaway one, never a REDIS_URL of someone else's.
  if (!redis.owned) throw new Error('redis-acl.test.ts changes ACL users: it needs redis-server on PATH (Debian: apt-get install redis-server)');
  const users = documentedUsers(redis.prefix);
  expect(users.map((u) => u[0])).toEqual(['acquirer-gateway', 'acquirer-gateway-admin']);
  for (const user of users) await redis.client.call('ACL', 'SETUSER', ...user);
  await redis.client.call('ACL', 'LOG', 'RESET');
  upstream = await startUpstream();
  upstream.handle(emptyStatementList);
  policyFile = path.join(tempDir('redis-acl'), 'policy.yaml');
  writeFileSync(policyFile, rateLimitedPolicyText({ defaultRate: '{ per_second: 0.05, burst: 4 }' }));
  const url = new URL(redis.url);
  admin = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, REDIS_USERNAME: 'acquirer-gateway-admin', REDIS_PASSWORD: PASSWORDS.ADMIN_PASSWORD, POLICY_FILE: policyFile };
  const gateway = { REDIS_URL: `redis://${url.host}`, REDIS_KEY_PREFIX: redis.prefix, REDIS_USERNAME: 'acquirer-gateway', REDIS_PASSWORD: PASSWORDS.GATEWAY_PASSWORD, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile };
  gateways.push(
    await startServe({ ...gateway, RATE_LIMIT_STORE: 'redis', RATE_LIMIT_FAIL: 'closed' }),
    await startServe({ ...gateway, RATE_LIMIT_STORE: 'local' }),
  );
  await waitForSubscribers(redis, 2);
}, 30_000);

afterAll(() =>
  stopAll(
    () => Promise.all(gateways.map((g) => g.stop())),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

it('the documented users carry the keys commands and two gateways, and Redis refuses them nothing', async () => {
  const [inRedis, local] = gateways as [ServeProcess, ServeProcess];
  const { id, key } = await createKey(admin, { acquirer: 'acq_acl', permissions: ['eod_list', 'eod_read'] });
  for (const args of [['keys', 'list'], ['keys', 'show', id], ['keys', 'update', id, '--permissions', 'eod_list,eod_read,merchants_read']]) {
    const result = await runCli(args, admin);
    expect([args.join(' '), result.code, result.stderr]).toEqual([args.join(' '), 0, expect.not.stringMatching(/NOPERM|denied/i)]);
  }
  // The budget in Redis (RATE_LIMIT_FAIL=closed: a refused script would answer 503): 4, then 429.
  const fromRedis = [];
  for (let i = 0; i < 5; i++) fromRedis.push(await request(inRedis.url, LIST, bearer(key)));
  expect(fromRedis.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
  expect(fromRedis[4]!.body.toString()).toBe(TOO_MANY);
  // The local store's gateway announces itself in Redis's count of instances.
  await waitFor(async () => (await redis.client.zcard(`${redis.prefix}instances`)) === 1, { what: 'the local store counted' });
  expect((await request(local.url, LIST, bearer(key))).status).toBe(200);
  const disabled = await runCli(['keys', 'disable', id], admin);
  expect(disabled.code).toBe(0);
  await waitFor(async () => (await request(local.url, LIST, bearer(key))).status === 401, { timeoutMs: 4_000, what: 'the disable heard' });
  for (const g of gateways) expect((await request(g.adminUrl, '/readyz')).status).toBe(200);
  // Last, as the gateways run without the pepper: the records moved to their peppered hashes.
  const rehash = await runCli(['keys', 'rehash'], { ...admin, KEY_HASH_PEPPER: 'acl-test-pepper-0123456789-abcdefghij' });
  expect([rehash.code, JSON.parse(rehash.stdout)]).toEqual([0, expect.objectContaining({ migrated: 1 })]);
  const denied = (await redis.client.call('ACL', 'LOG')) as unknown[][];
  expect(denied.map((entry) => Object.fromEntries(Array.from({ length: entry.length / 2 }, (_, i) => [entry[2 * i], entry[2 * i + 1]])))).toEqual([]);
}, 60_000);
