import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request, type HttpResult } from '../helpers/http.js';
import { metricValue } from '../helpers/metrics.js';
import { SHIPPED_POLICY_FILE } from '../helpers/policy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { tempDir } from '../helpers/temp-dir.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * POLICY_SHADOW_FILE through HTTP: a candidate policy judges every request beside the enforced one,
 * and only says where it would have answered otherwise.
 */
const LIST = '/v1/acquirer/eod_statements';
const MERCHANTS = '/v1/acquirer/merchants';
const DISAGREEMENTS = 'acquirer_gateway_shadow_disagreements_total';
const SHIPPED = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
const LIST_PERMISSIONS = '    query: { page: positive_integer }\n    permissions: [eod_list, eod_read]\n';

/** The shipped policy with the list route's permissions (and query) line replaced. */
function listRouteAs(lines: string): string {
  if (!SHIPPED.includes(LIST_PERMISSIONS)) throw new Error('the shipped list route changed');
  return SHIPPED.replace(LIST_PERMISSIONS, lines);
}
/** The list route requires a permission the test's key does not carry. */
const LIST_FORBIDDEN = listRouteAs('    query: { page: positive_integer }\n    permissions: [eod_list, eod_read, audit_logs_read]\n');
/** The list route takes no query. */
const LIST_NO_QUERY = listRouteAs('    permissions: [eod_list, eod_read]\n');

let redis: TestRedis;
let upstream: RecordingUpstream;
let dir: string;
let shadowFile: string;
let key: string;
let keyId: string;
let plain: ServeProcess | undefined;
let shadowed: ServeProcess | undefined;

const metricsText = async (g: ServeProcess) => (await request(g.adminUrl, '/metrics')).body.toString();
const events = (g: ServeProcess, name: string) => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.event === name);
const disagreements = async (g: ServeProcess, labels: Record<string, string> = {}) => metricValue(await metricsText(g), DISAGREEMENTS, labels);

function serve(extra: Record<string, string> = {}): Promise<ServeProcess> {
  return startServe({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: SHIPPED_POLICY_FILE, ...extra });
}

/** What a client receives, minus what differs per response (Date, X-Request-Id). */
function answer(result: HttpResult): unknown {
  const { date: _date, 'x-request-id': _id, ...headers } = result.headers;
  return { status: result.status, headers, body: result.body.toString('latin1') };
}

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  upstream.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '21' });
    res.end('{"eod_statements":[]}');
  });
  dir = tempDir('agw-shadow-');
  shadowFile = path.join(dir, 'shadow.yaml');
  writeFileSync(shadowFile, LIST_FORBIDDEN);
  const created = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_shadow', permissions: ['eod_list', 'eod_read'] });
  [key, keyId] = [created.key, created.id];
  [plain, shadowed] = await Promise.all([serve(), serve({ POLICY_SHADOW_FILE: shadowFile })]);
}, 30_000);

afterAll(() =>
  stopAll(
    () => plain?.stop(),
    () => shadowed?.stop(),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

it('counts and logs, with the key id, a request the shadow would refuse, while the enforced answer stands', async () => {
  const g = shadowed!;
  const before = (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'forbidden' })) ?? 0;
  const res = await request(g.url, `${LIST}?page=2`, bearer(key));
  expect(res.status).toBe(200);
  await waitFor(async () => (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'forbidden' })) === before + 1, { what: 'the disagreement counted' });
  const line = await waitFor(() => events(g, 'shadow_disagreement')[0], { what: 'the shadow_disagreement line' });
  expect(line).toMatchObject({ level: 30, key_id: keyId, acquirer_id: 'acq_shadow', route: 'eod_statements_list', method: 'GET', enforced: 'allow', shadow: 'forbidden' });
  expect(g.logLines.join('\n')).not.toContain(key);
  expect(JSON.stringify(line)).not.toContain('page=2');
});

it('counts nothing for requests both policies judge alike, and answers them as a gateway without a shadow does, byte for byte', async () => {
  const g = shadowed!;
  const before = await disagreements(g);
  const asked: [string, Record<string, string>][] = [
    [MERCHANTS, bearer(key)], // forbidden by both
    ['/v1/nowhere', bearer(key)], // no route in either
    [LIST, { authorization: 'Bearer agw_unknown_key_0000000000000000000000' }], // no valid key: not judged
    [`${LIST}?page=0`, bearer(key)], // a bad query; the shadow refuses the permission first, so this one differs
  ];
  for (const [target, headers] of asked) {
    const [withShadow, without] = await Promise.all([request(g.url, target, headers), request(plain!.url, target, headers)]);
    expect({ target, ...(answer(withShadow) as object) }).toEqual({ target, ...(answer(without) as object) });
  }
  // Only the last one disagrees (enforced bad_request, shadow forbidden).
  await waitFor(async () => (await disagreements(g, { enforced: 'bad_request', shadow: 'forbidden' })) === 1, { what: 'the one disagreement' });
  expect(await disagreements(g)).toBe((before ?? 0) + 1);
});

it('follows the shadow file when it changes, and keeps the running shadow when a changed one is refused', async () => {
  const g = shadowed!;
  writeFileSync(shadowFile, LIST_NO_QUERY);
  await waitFor(() => events(g, 'shadow_policy_reloaded')[0], { what: 'the shadow reloaded' });
  await request(g.url, `${LIST}?page=3`, bearer(key));
  await waitFor(async () => (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'bad_request' })) === 1, { what: 'the new verdict counted' });

  writeFileSync(shadowFile, 'routes: [\n');
  const refused = await waitFor(() => events(g, 'shadow_policy_refused')[0], { what: 'the refusal' });
  expect(refused).toMatchObject({ level: 50, file: shadowFile });
  expect(String((refused.errors as string[])[0])).toMatch(new RegExp(`^${shadowFile}:\\d+`));
  // The enforced policy was not touched, and the running shadow stays.
  expect(events(g, 'policy_reload_refused')).toEqual([]);
  await request(g.url, `${LIST}?page=4`, bearer(key));
  await waitFor(async () => (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'bad_request' })) === 2, { what: 'the kept shadow judging' });
});

it('without POLICY_SHADOW_FILE, has no such series and writes no such line', async () => {
  await request(plain!.url, `${LIST}?page=2`, bearer(key));
  const text = await metricsText(plain!);
  expect(text).toContain('acquirer_gateway_requests_total');
  expect(text).not.toContain(DISAGREEMENTS);
  expect(events(plain!, 'shadow_disagreement')).toEqual([]);
});

it('refuses to start with a shadow file it cannot accept, naming the file and line', async () => {
  const bad = path.join(dir, 'bad.yaml');
  writeFileSync(bad, SHIPPED.replace('permissions: [eod_list, eod_read]', 'permissions: [eod_list, no_such_permission]'));
  const result = await runCli(['serve'], { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, POLICY_FILE: SHIPPED_POLICY_FILE, POLICY_SHADOW_FILE: bad, PORT: '0', ADMIN_PORT: '0' });
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain('shadow policy refused (POLICY_SHADOW_FILE)');
  expect(result.stderr).toMatch(new RegExp(`${bad}:\\d+`));
});

it('refuses POLICY_SHADOW_FILE with WORKERS above 1', async () => {
  const result = await runCli(['serve'], { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, POLICY_FILE: SHIPPED_POLICY_FILE, POLICY_SHADOW_FILE: shadowFile, WORKERS: '2', PORT: '0', ADMIN_PORT: '0' });
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain('POLICY_SHADOW_FILE: not with WORKERS above 1');
});

it('reloads the shadow file on SIGHUP, with the policy file', async () => {
  const file = path.join(dir, 'signalled.yaml');
  writeFileSync(file, LIST_FORBIDDEN);
  const g = await serve({ POLICY_SHADOW_FILE: file, POLICY_WATCH: 'false' });
  try {
    writeFileSync(file, LIST_NO_QUERY);
    g.child.kill('SIGHUP');
    expect(await waitFor(() => events(g, 'shadow_policy_reloaded')[0], { what: 'the shadow reloaded' })).toMatchObject({ trigger: 'signal', file });
    await request(g.url, `${LIST}?page=2`, bearer(key));
    await waitFor(async () => (await disagreements(g, { enforced: 'allow', shadow: 'bad_request' })) === 1, { what: 'the new verdict counted' });
    expect(await disagreements(g, { shadow: 'forbidden' })).toBeUndefined();
  } finally {
    await g.stop();
  }
});
