import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request, type HttpResult } from '../helpers/http.js';
import { metricValue } from '../helpers/metrics.js';
import { SHIPPED_POLICY_FILE } from '../helpers/policy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { tempDir } from '../helpers/temp-dir.js';
import { emptyStatementList, startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
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
  upstream.handle(emptyStatementList);
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

describe('WORKERS=2', () => {
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const pids = (lines: Record<string, unknown>[]) => new Set(lines.map((e) => e.pid as number));
  /** `n` list requests, each on its own connection, so that the primary hands them to every worker; each must be answered 200. */
  async function burst(g: ServeProcess, target: string, n: number): Promise<void> {
    const statuses = await Promise.all(Array.from({ length: n }, async () => (await request(g.url, target, bearer(key))).status));
    expect(statuses).toEqual(Array(n).fill(200));
  }

  it("the primary gives every worker the shadow, each reload and a replacement too; its /metrics sums the workers' counts", async () => {
    const file = path.join(dir, 'workers.yaml');
    writeFileSync(file, LIST_FORBIDDEN);
    const g = await serve({ POLICY_SHADOW_FILE: file, WORKERS: '2' });
    try {
      const listening = events(g, 'listening')[0]!;
      const workers = listening.workers as number[];
      expect(workers).toHaveLength(2);
      const served = () => events(g, 'request').length;
      const n = 20;

      // Both workers judge in the shadow, and the primary's /metrics has what both counted.
      await burst(g, `${LIST}?page=2`, n);
      await waitFor(async () => (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'forbidden' })) === n, { what: 'every disagreement summed' });
      await waitFor(() => served() === n, { what: 'the access lines' });
      expect(pids(events(g, 'request'))).toEqual(new Set(workers));
      expect(pids(events(g, 'shadow_disagreement'))).toEqual(new Set(workers));

      // A change to the file: the primary alone reads it, and each worker applies what it accepted.
      writeFileSync(file, LIST_NO_QUERY);
      // Each process writes its own lines to the one stdout: the primary's may come after the workers'.
      await waitFor(() => events(g, 'shadow_policy_applied').length === 2 && events(g, 'shadow_policy_reloaded').length > 0, { what: 'both workers to apply the reloaded shadow' });
      expect(events(g, 'shadow_policy_reloaded').map((e) => [e.pid, e.to])).toEqual([[listening.pid, sha256(LIST_NO_QUERY)]]);
      expect(events(g, 'shadow_policy_applied').map((e) => [e.to, e.from])).toEqual(Array(2).fill([sha256(LIST_NO_QUERY), sha256(LIST_FORBIDDEN)]));
      expect(pids(events(g, 'shadow_policy_applied'))).toEqual(new Set(workers));
      await burst(g, `${LIST}?page=3`, n);
      await waitFor(async () => (await disagreements(g, { route: 'eod_statements_list', enforced: 'allow', shadow: 'bad_request' })) === n, { what: 'the new verdicts summed' });
      expect(await disagreements(g, { shadow: 'forbidden' })).toBe(n);
      await waitFor(() => served() === 2 * n, { what: 'the access lines' });

      // A replacement worker starts with the shadow accepted last, not the file's first.
      process.kill(workers[0]!, 'SIGKILL');
      const replacement = (await waitFor(() => events(g, 'worker_replaced')[0], { what: 'the replacement' })).replacement_pid as number;
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'every worker ready again' });
      await burst(g, `${LIST}?page=4`, n);
      await waitFor(async () => (await disagreements(g, { shadow: 'bad_request' })) === 2 * n, { what: "the replacement's verdicts summed" });
      await waitFor(() => served() === 3 * n, { what: 'the access lines' });
      expect(pids(events(g, 'request').slice(2 * n))).toEqual(new Set([workers[1], replacement]));
      // The dead worker's counts stay in the sums, and nothing is judged by the shadow it started with.
      expect(await disagreements(g, { shadow: 'forbidden' })).toBe(n);
      expect(events(g, 'shadow_policy_applied').filter((e) => e.pid === replacement)).toEqual([]);
    } finally {
      await g.stop();
    }
  }, 30_000);

  it('reloads the shadow on SIGHUP to the primary, and every worker applies it', async () => {
    const file = path.join(dir, 'workers-signalled.yaml');
    writeFileSync(file, LIST_FORBIDDEN);
    const g = await serve({ POLICY_SHADOW_FILE: file, WORKERS: '2', POLICY_WATCH: 'false' });
    try {
      const workers = events(g, 'listening')[0]!.workers as number[];
      writeFileSync(file, LIST_NO_QUERY);
      g.child.kill('SIGHUP');
      expect(await waitFor(() => events(g, 'shadow_policy_reloaded')[0], { what: 'the shadow reloaded' })).toMatchObject({ trigger: 'signal', file, to: sha256(LIST_NO_QUERY) });
      await waitFor(() => events(g, 'shadow_policy_applied').length === 2, { what: 'both workers to apply it' });
      expect(pids(events(g, 'shadow_policy_applied'))).toEqual(new Set(workers));
      // The enforced policy did not change: the workers were sent the shadow alone.
      expect(events(g, 'policy_applied')).toEqual([]);
    } finally {
      await g.stop();
    }
  }, 30_000);

  it('refuses at start-up a shadow file it cannot accept, as with one process', async () => {
    const bad = path.join(dir, 'bad-workers.yaml');
    writeFileSync(bad, 'routes: [\n');
    const result = await runCli(['serve'], { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, POLICY_FILE: SHIPPED_POLICY_FILE, POLICY_SHADOW_FILE: bad, WORKERS: '2', PORT: '0', ADMIN_PORT: '0' });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('shadow policy refused (POLICY_SHADOW_FILE)');
    expect(result.stderr).toMatch(new RegExp(`${bad}:\\d+`));
  });
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
