import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { SHIPPED_POLICY_FILE } from '../helpers/policy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';

let redis: TestRedis;
let env: Record<string, string>;
let upstream: RecordingUpstream;
let gateway: ServeProcess;

beforeAll(async () => {
  redis = await startTestRedis();
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  upstream = await startUpstream();
  gateway = await startServe({ ...env, UPSTREAM_URL: upstream.url });
});
afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
  await redis?.stop();
});

/** The answer `policy explain` states for a refused request: its code, status and body. */
function statedRefusal(stdout: string): { code: string; status: number; body: string } {
  const match = /\nrefused at the [a-z' ()]+ step \(([A-Z_]+)\); the gateway answers\n {2}(\d{3}) (.*)\n/.exec(stdout);
  if (match === null) throw new Error(`no refusal in:\n${stdout}`);
  return { code: match[1]!, status: Number(match[2]), body: match[3]! };
}

/** Sends the request to the running gateway, from 127.0.0.1, and gives its answer as explain states one. */
async function gatewayAnswer(method: string, target: string, key: string): Promise<{ status: number; body: string }> {
  const answer = await request(gateway.url, target, bearer(key), method);
  return { status: answer.status, body: answer.body.toString() };
}

describe('policy explain', () => {
  it('an allowed request: exit 0, the target and acquirer header the upstream receives, as it does receive them', async () => {
    const { id, key } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] });
    const target = '/v1/acquirer/eod_statements?page=2';
    const result = await runCli(['policy', 'explain', 'GET', target, '--key-id', id], env);
    expect([result.code, result.stderr]).toEqual([0, '']);
    expect(result.stdout).toContain(`GET ${target}\nkey ${id}, policy ${SHIPPED_POLICY_FILE}\n`);
    expect(result.stdout).toMatch(/\n {2}route +passes +eod_statements_list: GET \/v1\/acquirer\/eod_statements\n/);
    expect(result.stdout).toContain(`\nallowed; the upstream receives\n  GET ${target}\n  x-acquirer-id: acq_alpha\n`);
    expect(result.stdout).toContain('\nunless, in steps not judged here:\n  - acq_alpha with ACQUIRER_MAX_IN_FLIGHT requests under way in the process: 429 {"message":"Too many requests"}\n');
    expect(result.stdout).not.toContain(key.slice('acquirer_key_'.length));

    const before = upstream.received.length;
    expect((await gatewayAnswer('GET', target, key)).status).toBe(200);
    expect(upstream.received.slice(before).map((r) => [r.method, r.url, r.headers['x-acquirer-id']])).toEqual([['GET', target, 'acq_alpha']]);
  });

  it.each([
    ['a missing permission', { acquirer: 'acq_alpha', permissions: ['eod_list'] }, 'GET', '/v1/acquirer/eod_statements', [], 'PERMISSION_DENIED', /\n {2}permission +refuses +the key lacks eod_read \(the route requires eod_list, eod_read\)\n/],
    ['an address outside the whitelist', { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'], allowIp: ['203.0.113.0/24'] }, 'GET', '/v1/acquirer/eod_statements', ['--from', '127.0.0.1'], 'IP_NOT_ALLOWED', /\n {2}client address +refuses +127\.0\.0\.1 is outside the key's whitelist \(203\.0\.113\.0\/24\)\n/],
    ['an unknown route', { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] }, 'POST', '/v1/acquirer/eod_statements', [], 'ROUTE_NOT_FOUND', /\n {2}route +refuses +no POST route matches \/v1\/acquirer\/eod_statements; it is a route for GET \(eod_statements_list\)\n/],
    ['a bad query parameter', { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] }, 'GET', '/v1/acquirer/eod_statements?page=0', [], 'QUERY_NOT_ALLOWED', /\n {2}query +refuses +page: "0" is not positive_integer \(the route takes page: positive_integer\)\n/],
  ])('%s: exit 3, the step that decides and why, and the answer the gateway gives', async (_what, key, method, target, extra, code, why) => {
    const created = await createKey(env, key);
    const result = await runCli(['policy', 'explain', method, target, '--key-id', created.id, ...extra], env);
    expect([result.code, result.stderr]).toEqual([3, '']);
    expect(result.stdout).toMatch(why);
    const stated = statedRefusal(result.stdout);
    expect(stated.code).toBe(code);
    expect(await gatewayAnswer(method, target, created.key)).toEqual({ status: stated.status, body: stated.body });
  });

  it('with ACQUIRER_SIGNING_SECRET: lists the key id and the signature for this second, which a backend verifies, and never the secret', async () => {
    const { verifyAcquirerSignature } = (await import(pathToFileURL(path.resolve('docs/verify-acquirer-signature.mjs')).href)) as {
      verifyAcquirerSignature: (req: { method: string; url: string; headers: Record<string, string> }, secrets: string[]) => boolean;
    };
    const secret = 'explain-secret-0123456789abcdefghijk';
    const { id } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] });
    const target = '/v1/acquirer/eod_statements?page=2';
    const from = Math.floor(Date.now() / 1000);
    const result = await runCli(['policy', 'explain', 'GET', target, '--key-id', id], { ...env, ACQUIRER_SIGNING_SECRET: secret });
    const to = Math.floor(Date.now() / 1000);
    expect([result.code, result.stderr]).toEqual([0, '']);
    const listed = /\nallowed; the upstream receives\n {2}GET (\S+)\n {2}x-acquirer-id: (\S+)\n {2}x-acquirer-key-id: (\S+)\n {2}x-acquirer-signature: (t=(\d+),v1=[0-9a-f]{64})\n/.exec(result.stdout);
    expect(listed).not.toBeNull();
    const [, url, acquirerId, keyId, signature, t] = listed!;
    expect([url, acquirerId, keyId]).toEqual([target, 'acq_alpha', id]);
    expect(Number(t)).toBeGreaterThanOrEqual(from);
    expect(Number(t)).toBeLessThanOrEqual(to);
    const headers = { 'x-acquirer-id': acquirerId!, 'x-acquirer-key-id': keyId!, 'x-acquirer-signature': signature! };
    expect(verifyAcquirerSignature({ method: 'GET', url: target, headers }, [secret])).toBe(true);
    expect(verifyAcquirerSignature({ method: 'GET', url: target, headers }, ['other-secret-0123456789abcdefghijklmn'])).toBe(false);
    expect(result.stdout).not.toContain(secret);

    const unsigned = await runCli(['policy', 'explain', 'GET', target, '--key-id', id], env);
    expect(unsigned.code).toBe(0);
    expect(unsigned.stdout).not.toMatch(/x-acquirer-(signature|key-id)/);
  });

  it('without --from, names the whitelist and the answer from outside it', async () => {
    const { id } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list'], allowIp: ['203.0.113.0/24'] });
    const result = await runCli(['policy', 'explain', 'GET', '/v1/acquirer/eod_statements', '--key-id', id], env);
    expect(result.code).toBe(3);
    expect(result.stdout).toContain("\n  client address    not judged  no --from given; the key's whitelist is 203.0.113.0/24\n");
    expect(result.stdout).toContain('\n  - from outside 203.0.113.0/24: 401 {"message":"Invalid authentication information"}\n');
  });

  it('a disabled key: exit 3, and the 401 the gateway gives it', async () => {
    const { id, key } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] });
    expect((await runCli(['keys', 'disable', id], env)).code).toBe(0);
    const result = await runCli(['policy', 'explain', 'GET', '/v1/acquirer/eod_statements', '--key-id', id], env);
    expect(result.code).toBe(3);
    expect(result.stdout).toMatch(new RegExp(`\\n {2}key +refuses +${id} \\(acquirer acq_alpha\\) was disabled at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\n {2}not reached: client address, route,`));
    const stated = statedRefusal(result.stdout);
    expect(stated.code).toBe('API_KEY_DISABLED');
    expect(await gatewayAnswer('GET', '/v1/acquirer/eod_statements', key)).toEqual({ status: stated.status, body: stated.body });
  });

  it('a body route: says which body it takes, and that it is not judged', async () => {
    const { id } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['merchants_create'] });
    const result = await runCli(['policy', 'explain', 'POST', '/v1/acquirer/merchants', '--key-id', id], env);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('\n  body (head)       not judged  no body given; the route takes application/json, at most 65536 bytes\n');
  });

  it.each([
    [['GET', '/v1/acquirer/eod_statements'], /^acquirer-gateway: --key-id: required\nusage: acquirer-gateway policy explain /],
    [['GET', '--key-id', 'key_0123'], /^acquirer-gateway: explain takes a METHOD and a TARGET\n/],
    [['get', '/v1/acquirer/eod_statements', '--key-id', 'key_0123'], /^acquirer-gateway: METHOD: "get" is not a method Node's HTTP parser reads/],
    [['GET', '/v1/a b', '--key-id', 'key_0123'], /^acquirer-gateway: TARGET: a request-target is visible ASCII/],
    [['GET', '/v1/acquirer/eod_statements', '--key-id', 'key_0123', '--from', '010.0.0.1'], /^acquirer-gateway: --from: "010.0.0.1" is not an IP address/],
    [['GET', '/v1/acquirer/eod_statements', '--key-id', 'key_0123', '--colour'], /^acquirer-gateway: Unknown option '--colour'/],
  ])('%j: a usage error, exit 2', async (args, message) => {
    const result = await runCli(['policy', 'explain', ...args], env);
    expect([result.code, result.stdout]).toEqual([2, '']);
    expect(result.stderr).toMatch(message);
  });

  it('an API key given for its id: exit 2, not looked up or printed', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list'] });
    const result = await runCli(['policy', 'explain', 'GET', '/v1/acquirer/eod_statements', '--key-id', key], env);
    expect([result.code, result.stdout]).toEqual([2, '']);
    expect(result.stderr).toMatch(/this argument is shaped like an API key: it was not looked up or printed/);
    expect(result.stderr).not.toContain(key.slice('acquirer_key_'.length, 30));
  });

  it('no such key, or no Redis: exit 1 saying so', async () => {
    const missing = await runCli(['policy', 'explain', 'GET', '/v1/acquirer/eod_statements', '--key-id', 'key_nope'], env);
    expect([missing.code, missing.stdout, missing.stderr]).toEqual([1, '', 'acquirer-gateway: no key with id key_nope\n']);
    const down = await runCli(['policy', 'explain', 'GET', '/v1/acquirer/eod_statements', '--key-id', 'key_nope'], { REDIS_URL: 'redis://127.0.0.1:9' });
    expect([down.code, down.stdout]).toEqual([1, '']);
    expect(down.stderr).toMatch(/^acquirer-gateway: cannot use Redis at /);
  });
});

describe('policy impact', () => {
  let impactEnv: Record<string, string>;
  let files: { shipped: string; stricter: string };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    impactEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: `${redis.prefix}impact:` };
    const shipped = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
    const stricter = shipped.replace('path: /v1/acquirer/eod_statements\n    query: { page: positive_integer }\n    permissions: [eod_list, eod_read]', 'path: /v1/acquirer/eod_statements\n    query: { page: positive_integer }\n    permissions: [eod_list, eod_read, audit_logs_read]');
    expect(stricter).not.toBe(shipped);
    const dir = tempDir('gw-impact-');
    files = { shipped: SHIPPED_POLICY_FILE, stricter: path.join(dir, 'stricter.yaml') };
    writeFileSync(files.stricter, stricter);
    ids.alpha = (await createKey(impactEnv, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] })).id;
    ids.alphaAudit = (await createKey(impactEnv, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read', 'audit_logs_read'] })).id;
    ids.beta = (await createKey(impactEnv, { acquirer: 'acq_beta', permissions: ['eod_list', 'eod_read'] })).id;
    ids.betaDisabled = (await createKey(impactEnv, { acquirer: 'acq_beta', permissions: ['eod_list', 'eod_read'] })).id;
    expect((await runCli(['keys', 'disable', ids.betaDisabled], impactEnv)).code).toBe(0);
  });

  it("a permission added to a route: exit 3, the keys that lose access, counted per acquirer", async () => {
    const result = await runCli(['policy', 'impact', files.shipped, files.stricter], impactEnv);
    expect([result.code, result.stderr]).toEqual([3, '']);
    expect(result.stdout).toContain(`## Key access: \`${files.shipped}\` → \`${files.stricter}\`\n\n⚠️ **2 keys lose access** (to 1 route); none gains any; 3 keys judged.\n`);
    expect(result.stdout).toContain('| `acq_alpha` | 1 | 0 |\n| `acq_beta` | 1 | 0 |\n');
    expect(result.stdout).toContain(
      '### `GET /v1/acquirer/eod_statements` (route `eod_statements_list`)\n\nRequires `eod_list`, `eod_read`, `audit_logs_read` (was `eod_list`, `eod_read`).\n\n' +
        `- ⚠️ **loses access: 2 keys**: \`acq_alpha\` (1): \`${ids.alpha}\`; \`acq_beta\` (1): \`${ids.beta}\`\n`,
    );
    expect(result.stdout).toContain('\n4 keys read from Redis; 1 disabled, left out.');
    expect(result.stdout).not.toContain(ids.betaDisabled);
    expect(result.stdout).not.toContain('key_hash');
  });

  it('only access gained: exit 0', async () => {
    const result = await runCli(['policy', 'impact', files.stricter, files.shipped], impactEnv);
    expect([result.code, result.stderr]).toEqual([0, '']);
    expect(result.stdout).toContain('No key loses access; 2 keys gain access (to 1 route); 3 keys judged.\n');
    expect(result.stdout).toContain(`- gains access: 2 keys: \`acq_alpha\` (1): \`${ids.alpha}\`; \`acq_beta\` (1): \`${ids.beta}\`\n`);
  });

  it('usage errors exit 2; an invalid policy or no Redis exit 1', async () => {
    expect((await runCli(['policy', 'impact', files.shipped], impactEnv)).code).toBe(2);
    const invalid = await runCli(['policy', 'impact', files.shipped, 'test/fixtures/policies/bad-template.yaml'], impactEnv);
    expect([invalid.code, invalid.stdout]).toEqual([1, '']);
    const down = await runCli(['policy', 'impact', files.shipped, files.stricter], { REDIS_URL: 'redis://127.0.0.1:9' });
    expect([down.code, down.stdout]).toEqual([1, '']);
    expect(down.stderr).toMatch(/^acquirer-gateway: cannot use Redis at /);
  });
});
