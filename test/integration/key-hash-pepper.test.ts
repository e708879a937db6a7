import { createHash } from 'node:crypto';
import { pepperedHash } from '../../src/keys/key-hash.js';
import { REHASH_SCRIPT } from '../../src/keys/rehash.js';
import { createKey, runCli, startServe, type CliResult, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { startTestRedis, type TestRedis, waitForSubscribers } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * KEY_HASH_PEPPER (issue 33): keys created before it keep working on a gateway that has it, `keys
 * rehash` moves them to the peppered form one by one, and a disable reaches the gateway's cache
 * whichever form it names. Verdicts are cached for a minute, so a refusal within 1 s is the notice's.
 */
const LIST = '/v1/acquirer/eod_statements';
const PEPPER = 'integration-pepper-0123456789-abcdefghij';
const REVOCATION_MS = 1_000;

let redis: TestRedis;
let upstream: RecordingUpstream;
let peppered: ServeProcess;
let plain: ServeProcess;
let env: Record<string, string>;
let pepperEnv: Record<string, string>;
/** Everything every command printed: the pepper must be in none of it. */
const printed: CliResult[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  pepperEnv = { ...env, KEY_HASH_PEPPER: PEPPER };
  [peppered, plain] = await Promise.all([startServe({ ...pepperEnv, UPSTREAM_URL: upstream.url }), startServe({ ...env, UPSTREAM_URL: upstream.url })]);
  await waitForSubscribers(redis, 2);
}, 30_000);

afterAll(() =>
  stopAll(
    () => peppered?.stop(),
    () => plain?.stop(),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

async function cli(args: string[], withPepper: boolean): Promise<CliResult> {
  const result = await runCli(args, withPepper ? pepperEnv : env);
  printed.push(result);
  return result;
}

const status = async (gateway: ServeProcess, key: string) => (await request(gateway.url, LIST, bearer(key))).status;
const sha256 = (key: string) => createHash('sha256').update(key).digest('hex');

async function refusedWithin(gateway: ServeProcess, key: string, ms: number): Promise<void> {
  await waitFor(async () => (await status(gateway, key)) === 401, { timeoutMs: ms, intervalMs: 20, what: 'the key to be refused' });
}

/** Every record name and id mapping under the prefix, with its value. */
async function dump(): Promise<Record<string, string>> {
  const names = (await redis.client.keys(`${redis.prefix}*`)).filter((n) => /:(key|id):/.test(n.slice(redis.prefix.length - 1))).sort();
  return Object.fromEntries(await Promise.all(names.map(async (n) => [n, (await redis.client.get(n))!] as const)));
}

const permissions = ['eod_list', 'eod_read'];
const keys: { id: string; key: string }[] = [];

it('serves keys created without the pepper on a gateway that has it, and refuses one disabled without it within 1 s', async () => {
  for (const acquirer of ['acq_a', 'acq_b', 'acq_c', 'acq_d']) keys.push(await createKey(env, { acquirer, permissions }));
  for (const { key } of keys) expect(await status(peppered, key)).toBe(200); // cached by the peppered form
  const disabled = await cli(['keys', 'disable', keys[3]!.id], false); // announces the plain form
  expect(disabled.code).toBe(0);
  await refusedWithin(peppered, keys[3]!.key, REVOCATION_MS);
  expect(await status(peppered, keys[0]!.key)).toBe(200);
});

it('keeps every key working when a run stops after one key', async () => {
  // One key moved as `keys rehash` moves it, the run then cut short.
  const { id } = keys[0]!;
  const plainHash = (await redis.client.get(`${redis.prefix}id:${id}`))!;
  const record = JSON.parse((await redis.client.get(`${redis.prefix}key:${plainHash}`))!);
  const pepperedName = pepperedHash(PEPPER, plainHash);
  const raw = (await redis.client.get(`${redis.prefix}key:${plainHash}`))!;
  const moved = await redis.client.eval(REHASH_SCRIPT, 4, `${redis.prefix}id:${id}`, `${redis.prefix}key:${plainHash}`, `${redis.prefix}key:${pepperedName}`, `${redis.prefix}peppered`, plainHash, raw, JSON.stringify({ ...record, key_hash: pepperedName }), pepperedName, id);
  expect(moved).toBe(1);
  expect(await redis.client.exists(`${redis.prefix}key:${plainHash}`)).toBe(0);
  for (const { key } of keys.slice(0, 3)) expect(await status(peppered, key)).toBe(200);
  const show = await cli(['keys', 'show', id], false);
  expect(show.code).toBe(0);
  expect(JSON.parse(show.stdout)).toMatchObject({ id, acquirer_id: 'acq_a' });
  expect((await cli(['keys', 'list'], true)).stdout.trim().split('\n')).toHaveLength(4);
});

it('refuses to rehash without the pepper (exit 2), and moves every plain record with it, once', async () => {
  const without = await cli(['keys', 'rehash'], false);
  expect(without.code).toBe(2);
  expect(without.stderr).toMatch(/KEY_HASH_PEPPER is not set/);

  const first = await cli(['keys', 'rehash'], true);
  expect(first.code).toBe(0);
  expect(JSON.parse(first.stdout)).toEqual({ migrated: 3, already_peppered: 1, unreadable: 0 });
  const after = await dump();
  const recordNames = Object.keys(after).filter((n) => n.startsWith(`${redis.prefix}key:`));
  expect(recordNames.sort()).toEqual(keys.map(({ key }) => `${redis.prefix}key:${pepperedHash(PEPPER, sha256(key))}`).sort());
  // A dump's names and values hold no key's SHA-256 any more.
  for (const { key } of keys) expect(JSON.stringify(after)).not.toContain(sha256(key));
  expect((await redis.client.smembers(`${redis.prefix}peppered`)).sort()).toEqual(keys.map(({ id }) => id).sort());

  const second = await cli(['keys', 'rehash'], true);
  expect(second.code).toBe(0);
  expect(JSON.parse(second.stdout)).toEqual({ migrated: 0, already_peppered: 4, unreadable: 0 });
  expect(await dump()).toEqual(after);

  for (const { key } of keys.slice(0, 3)) expect(await status(peppered, key)).toBe(200);
  expect(await status(peppered, keys[3]!.key)).toBe(401);
});

it.each([
  ['a command with the pepper', true, 1],
  ['a command without it', false, 2],
])('refuses a moved key disabled by %s within 1 s', async (_who, withPepper, which) => {
  const { id, key } = keys[which]!;
  expect(await status(peppered, key)).toBe(200);
  const disabled = await cli(['keys', 'disable', id], withPepper);
  expect(disabled.code).toBe(0);
  await refusedWithin(peppered, key, REVOCATION_MS);
});

it('creates peppered keys, which a gateway without the pepper refuses (401), as documented', async () => {
  const { id, key } = await createKey(pepperEnv, { acquirer: 'acq_e', permissions });
  expect(await redis.client.get(`${redis.prefix}id:${id}`)).toBe(pepperedHash(PEPPER, sha256(key)));
  expect(await redis.client.sismember(`${redis.prefix}peppered`, id)).toBe(1);
  expect(await status(peppered, key)).toBe(200);
  expect(await status(plain, key)).toBe(401);
  const updated = await cli(['keys', 'update', id, '--permissions', 'eod_list'], false);
  expect(updated.code).toBe(0);
  expect(JSON.parse(updated.stdout)).toMatchObject({ id, permissions: ['eod_list'] });
});

it('reports a record it cannot read and exits 1, leaving it as it is', async () => {
  const { id } = await createKey(env, { acquirer: 'acq_f', permissions });
  const hash = (await redis.client.get(`${redis.prefix}id:${id}`))!;
  await redis.client.set(`${redis.prefix}key:${hash}`, 'not json');
  const run = await cli(['keys', 'rehash'], true);
  expect(run.code).toBe(1);
  expect(JSON.parse(run.stdout)).toEqual({ migrated: 0, already_peppered: 5, unreadable: 1 });
  expect(run.stderr).toContain(`sha256 ${hash.slice(0, 12)}…`);
  expect(await redis.client.get(`${redis.prefix}key:${hash}`)).toBe('not json');
});

it('refuses a short pepper without echoing it, and never prints or logs the pepper', async () => {
  const short = await runCli(['keys', 'list'], { ...env, KEY_HASH_PEPPER: 'short-pepper-value' });
  expect(short.code).toBe(2);
  expect(short.stderr).toMatch(/KEY_HASH_PEPPER/);
  expect(short.stderr).not.toContain('short-pepper-value');
  expect(printed.length).toBeGreaterThan(5);
  for (const { stdout, stderr } of printed) expect(stdout + stderr).not.toContain(PEPPER);
  expect(peppered.logLines.join('\n') + peppered.stderr()).not.toContain(PEPPER);
});
