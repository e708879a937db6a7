import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KEY_STORE_PROBLEM_EVERY_MS } from '../../src/gateway.js';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { openRaw, parseRawResponses, sendUntilServerCloses } from '../helpers/raw.js';
import { STATEMENT_ID } from '../helpers/policy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';
import { metricValue } from '../helpers/metrics.js';

/**
 * The gateway as a platform team runs it: metrics, health and readiness on the admin listener,
 * policy reloads, graceful shutdown, and logs that never hold a key.
 */
const LIST = '/v1/acquirer/eod_statements';
const CSV = `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`;
const PERMISSIONS = '/v1/acquirer/api_keys/permissions';

let redis: TestRedis;
let relay: TcpProxy;
let upstream: RecordingUpstream;
let env: Record<string, string>;
let policyDir: string;
let policyFile: string;
const allLogLines: string[] = [];
const secrets: string[] = [];
/** Releases the slow download the shutdown test holds open. */
let finishSlow: (() => void) | undefined;

/** Releases the answers the upstream holds back (by_date 2000-01-01). */
let held: (() => void)[] = [];


/**
 * Starts a download of the slow CSV (its upstream holds the body open until `finishSlow()`), and
 * resolves once it is streaming, to a promise of the whole response.
 */
async function startSlowDownload(g: ServeProcess, key: string): Promise<{ done: Promise<{ status: number; body: string }> }> {
  const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get({ host: '127.0.0.1', port: g.port, path: CSV, agent: false, headers: bearer(key) }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', reject);
    }).on('error', reject);
  });
  await waitFor(() => finishSlow !== undefined, { what: 'the download to start' });
  return { done }; // wrapped: a promise resolved with a promise would wait for the whole download
}

const adminGet = async (g: ServeProcess, p: string) => request(g.adminUrl, p);
const metricsText = async (g: ServeProcess) => (await adminGet(g, '/metrics')).body.toString();

beforeAll(async () => {
  redis = await startTestRedis();
  relay = await startTcpProxy(redis.url);
  upstream = await startUpstream();
  upstream.handle((req, res) => {
    if (req.url!.startsWith(CSV)) {
      // A download that stays open until the test lets it finish.
      res.writeHead(200, { 'content-type': 'text/csv' });
      res.write('first,part\r\n');
      finishSlow = () => res.end('last,part\r\n');
      return;
    }
    if (req.url!.includes('2000-01-01')) {
      // An answer that waits until the test lets it go.
      held.push(() => {
        res.writeHead(200, { 'content-type': 'text/csv', 'content-length': '6' });
        res.end('held\r\n');
      });
      return;
    }
    if (req.url!.includes('1999-01-01')) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('nope');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"eod_statements":[]}');
  });
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  policyDir = mkdtempSync(path.join(tmpdir(), 'agw-policy-'));
  policyFile = path.join(policyDir, 'policy.yaml');
  copyFileSync('policies/acquirer-api.yaml', policyFile);
}, 30_000);

afterAll(() =>
  stopAll(
    () => relay?.close(),
    () => upstream?.close(),
    () => redis?.stop(),
    () => policyDir !== undefined && rmSync(policyDir, { recursive: true, force: true }),
  ),
);

async function serve(extra: Record<string, string> = {}): Promise<ServeProcess> {
  const g = await startServe({ REDIS_URL: relay.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile, LOG_LEVEL: 'debug', ...extra });
  await waitFor(async () => (await adminGet(g, '/readyz')).status === 200, { what: 'readiness' });
  return g;
}

describe('metrics, health and readiness', () => {
  let g: ServeProcess;
  let key: string;
  let keyId: string;
  beforeAll(async () => {
    g = await serve();
    const created = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    key = created.key;
    keyId = created.id;
    secrets.push(created.key);
  });
  afterAll(async () => {
    await g.stop();
    allLogLines.push(...g.logLines);
  });

  it('counts a scripted mix of requests by route, method, status and reason, with bounded labels', async () => {
    const unknownKey = `acquirer_key_${'U'.repeat(43)}`;
    secrets.push(unknownKey);
    const [listOnly, elsewhere, disabled] = await Promise.all([
      createKey(env, { acquirer: 'acq_1', permissions: ['eod_list'] }),
      createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'], allowIp: ['203.0.113.0/24'] }),
      createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] }),
    ]);
    secrets.push(listOnly.key, elsewhere.key, disabled.key);
    expect((await runCli(['keys', 'disable', disabled.id], env)).code).toBe(0);
    const sends: [string, http.OutgoingHttpHeaders, number][] = [
      [LIST, bearer(key), 200],
      [LIST, bearer(key), 200],
      [`${LIST}?page=2`, bearer(key), 200],
      [`/v1/acquirer/eod_statements/by_date/1999-01-01.csv`, bearer(key), 404], // the upstream has none
      [`${LIST}?acquirer_id=acq_2`, bearer(key), 400],
      [LIST, { ...bearer(key), 'transfer-encoding': 'chunked' }, 400], // a body (empty, but declared) on a route that takes none
      [PERMISSIONS, bearer(key), 200],
      [LIST, {}, 401],
      [LIST, bearer(unknownKey), 401],
      [LIST, bearer(unknownKey), 401],
      [`/v1/acquirer/random/${Math.random()}`, bearer(key), 404],
      [`/v1/acquirer//eod_statements?key=${key}`, bearer(key), 404],
      [LIST, bearer(listOnly.key), 403],
      [LIST, bearer(elsewhere.key), 401], // 127.0.0.1 is outside its whitelist
      [LIST, bearer(disabled.key), 401],
    ];
    for (const [p, headers, status] of sends) expect((await request(g.url, p, headers)).status).toBe(status);
    const text = await metricsText(g);
    const requests = (labels: Record<string, string>) => metricValue(text, 'acquirer_gateway_requests_total', labels);
    expect(requests({ route: 'eod_statements_list', method: 'GET', status: '200' })).toBe(3);
    expect(requests({ route: 'eod_statement_download_by_date', method: 'GET', status: '404' })).toBe(1);
    expect(requests({ route: 'api_keys_permissions', method: 'GET', status: '200' })).toBe(1);
    // A query the route does not take, a body it does not take: refused under the route they addressed.
    expect(requests({ route: 'eod_statements_list', method: 'GET', status: '400' })).toBe(2);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'bad_request' })).toBe(2);
    expect(requests({ route: 'unmatched', method: 'GET', status: '401' })).toBe(5);
    expect(requests({ route: 'eod_statements_list', method: 'GET', status: '403' })).toBe(1);
    expect(requests({ route: 'unmatched', method: 'GET', status: '404' })).toBe(2);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'missing_key' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'invalid_key' })).toBe(2);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'ip_not_allowed' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'disabled_key' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'permission_denied' })).toBe(1);
    // The unknown route only: a mapped upstream 404 is the upstream's answer, counted as mapped below.
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'not_found' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_denials_total', { reason: 'non_canonical_path' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_upstream_status_mapped_total', { route: 'eod_statement_download_by_date', upstream_status: '404', status: '404' })).toBe(1);
    // Its access line says the upstream refused it: the gateway allowed the request, the answer is no allow.
    const mapped = await waitFor(() => g.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'request' && e.route === 'eod_statement_download_by_date'), { what: 'the mapped access line' });
    expect(mapped).toMatchObject({ status: 404, decision: 'upstream_status', code: null, upstream_status: 404, completed: true });
    expect(metricValue(text, 'acquirer_gateway_key_resolutions_total', { layer: 'redis', result: 'hit' })).toBe(4); // one key, and the three refused
    expect(metricValue(text, 'acquirer_gateway_key_resolutions_total', { layer: 'memory', result: 'hit' })).toBeGreaterThanOrEqual(6);
    expect(metricValue(text, 'acquirer_gateway_key_resolutions_total', { layer: 'redis', result: 'miss' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_key_resolutions_total', { layer: 'memory', result: 'negative_hit' })).toBe(1);
    expect(metricValue(text, 'acquirer_gateway_request_duration_seconds_count', { route: 'eod_statements_list' })).toBe(6); // the 400s and the 403 too
    expect(text).toMatch(/acquirer_gateway_request_duration_seconds_bucket\{le="0\.0005",route="eod_statements_list"\}/);
    expect(metricValue(text, 'acquirer_gateway_upstream_duration_seconds_count', { route: 'eod_statements_list' })).toBe(3);
    expect(metricValue(text, 'acquirer_gateway_key_store_up')).toBe(1);
    expect(text).toMatch(/^acquirer_gateway_process_cpu_seconds_total /m);
    const hash = (await runCli(['policy', 'check', policyFile])).stdout.match(/sha256 ([0-9a-f]{64})/)![1];
    expect(metricValue(text, 'acquirer_gateway_policy_info', { hash: hash! })).toBe(1);
    // Nothing a client chose, and nothing secret, ever becomes a label.
    for (const forbidden of [key, key.slice(13, 30), keyId, 'random', '127.0.0.1', 'eod_statements?', 'acq_1']) expect(text).not.toContain(forbidden);
  });

  it('is healthy and ready, and not ready while Redis is unreachable', async () => {
    expect((await adminGet(g, '/healthz')).status).toBe(200);
    const ready = await adminGet(g, '/readyz');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body.toString())).toEqual({ status: 'ready', checks: { policy: 'ok', key_store: 'ok', shutdown: 'no' } });
    await relay.cut();
    await waitFor(async () => (await adminGet(g, '/readyz')).status === 503, { what: 'readiness to drop' });
    // A lookup that fails during the outage must not keep the gateway out of service afterwards.
    expect((await request(g.url, LIST, bearer(`acquirer_key_${'N'.repeat(43)}`))).status).toBe(503);
    expect(JSON.parse((await adminGet(g, '/readyz')).body.toString())).toEqual({ status: 'not_ready', checks: { policy: 'ok', key_store: 'unavailable', shutdown: 'no' } });
    expect((await adminGet(g, '/healthz')).status).toBe(200);
    expect(metricValue(await metricsText(g), 'acquirer_gateway_key_store_up')).toBe(0);
    await relay.heal();
    // No request is sent meanwhile: a gateway out of rotation gets none.
    await waitFor(async () => (await adminGet(g, '/readyz')).status === 200, { timeoutMs: 5000, what: 'readiness to return' });
    expect(metricValue(await metricsText(g), 'acquirer_gateway_key_store_up')).toBe(1);
  });

  it('counts, identifies and logs requests the HTTP parser refuses', async () => {
    const { parseRawResponse, sendRaw } = await import('../helpers/raw.js');
    const before = metricValue(await metricsText(g), 'acquirer_gateway_requests_total', { route: 'unmatched', status: '400' }) ?? 0;
    const raw = parseRawResponse(await sendRaw(g.port, 'GET / HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n'));
    expect(raw.status).toBe(400);
    expect(raw.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const expectation = await request(g.url, LIST, { ...bearer(key), expect: 'teapot' });
    expect(expectation.status).toBe(400);
    expect(expectation.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const after = metricValue(await metricsText(g), 'acquirer_gateway_requests_total', { route: 'unmatched', status: '400' });
    expect(after).toBe(before + 2);
    const lines = [];
    for (const id of [raw.headers['x-request-id'], expectation.headers['x-request-id']]) {
      lines.push(await waitFor(() => g.logLines.find((l) => l.includes(`"request_id":"${id}"`) && l.includes('"decision":"bad_request"')), { what: 'the access line' }));
    }
    // Every field of an access line, in its order; the client as other lines show it (not ::ffff:127.0.0.1).
    const fields = (line: string) => Object.keys(JSON.parse(line));
    expect((await request(g.url, LIST, bearer(key))).status).toBe(200);
    const allowed = await waitFor(() => g.logLines.find((l) => l.includes('"event":"request"') && l.includes('"decision":"allowed"')), { what: 'an allowed access line' });
    for (const line of lines) expect(fields(line)).toEqual(fields(allowed));
    expect(lines.map((l) => [JSON.parse(l).client, JSON.parse(l).path])).toEqual([['127.0.0.1', null], ['127.0.0.1', LIST]]);
  });

  it('a request whose body turns out malformed is answered, counted and logged once', async () => {
    const requestsTotal = async () =>
      [...(await metricsText(g)).matchAll(/^acquirer_gateway_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    // Log lines reach stdout in blocks, in order: once a request's line is there, every earlier one is.
    const lineOf = (res: { headers: Record<string, unknown> }) =>
      waitFor(
        () => {
          const at = g.logLines.findIndex((l) => l.includes(`"request_id":"${res.headers['x-request-id']}"`));
          return at >= 0 ? at + 1 : undefined;
        },
        { what: 'an access line' },
      );
    const lines = await lineOf(await request(g.url, LIST, bearer(key)));
    const before = await requestsTotal();
    const raw = await sendUntilServerCloses(g.port, `GET ${LIST} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n`);
    const [refused, ...more] = parseRawResponses(raw);
    expect([refused?.status, more]).toEqual([400, []]);
    // A request after it, on another connection: by its access line, the refused one's are all written.
    const marker = await request(g.url, LIST, bearer(key));
    expect(marker.status).toBe(200);
    const last = await lineOf(marker);
    expect(await requestsTotal()).toBe(before + 2);
    const accessLines = g.logLines.slice(lines, last).filter((l) => l.includes('"event":"request"'));
    expect(accessLines.map((l) => JSON.parse(l).request_id)).toEqual([refused!.headers['x-request-id'], marker.headers['x-request-id']]);
  });

  it('the public port never answers for admin paths', async () => {
    for (const p of ['/metrics', '/healthz', '/readyz']) {
      const res = await request(g.url, p, bearer(key));
      expect(res.status).toBe(404);
      expect(res.body.toString()).toBe('{"message":"Not found"}');
    }
  });

  it("carries the gateway's own request id, sent upstream and returned; the client's is only logged, bounded and sanitised", async () => {
    const sent = await request(g.url, LIST, { ...bearer(key), 'x-request-id': 'trace-123' });
    const id = String(sent.headers['x-request-id']);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(upstream.received.at(-1)!.headers['x-request-id']).toBe(id);
    const line = await waitFor(() => g.logLines.map((l) => JSON.parse(l)).find((e) => e.request_id === id), { what: 'the access line' });
    expect(line).toMatchObject({ event: 'request', client_request_id: 'trace-123', route: 'eod_statements_list', status: 200, decision: 'allowed', acquirer_id: 'acq_1', client: '127.0.0.1' });
    expect(line.key_id).toMatch(/^key_/);
    expect(typeof line.duration_ms).toBe('number');
    expect(typeof line.upstream_ms).toBe('number');

    // Two clients sending the same id get two ids; a long or odd one is cut and made plain; a key is never logged.
    const again = await request(g.url, LIST, { ...bearer(key), 'x-request-id': 'trace-123' });
    expect(again.headers['x-request-id']).not.toBe(id);
    const odd = await request(g.url, LIST, { 'x-request-id': `bad id\twith "quotes" ${'x'.repeat(200)}` });
    const pasted = await request(g.url, LIST, { 'x-request-id': key });
    expect([odd.status, pasted.status]).toEqual([401, 401]);
    const lines = await waitFor(
      () => {
        const all = g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
        const found = [odd, pasted].map((r) => all.find((e) => e.event === 'request' && e.request_id === r.headers['x-request-id']));
        return found.every(Boolean) ? found : undefined;
      },
      { what: 'both access lines' },
    );
    expect(lines[0]!.client_request_id).toBe(`bad_id_with_"quotes"_${'x'.repeat(128 - 21)}`);
    expect(lines[1]!.client_request_id).toBeNull();
    expect(g.logLines.join('\n')).not.toContain(key.slice('acquirer_key_'.length));
  });
});

describe('a subscription Redis refuses while lookups work', () => {
  it('leaves a disabled key refused within a second, and is logged once per period with how many were left out', async () => {
    // A Redis user without channel rights: lookups work, every SUBSCRIBE is refused (NOPERM), ten times a second.
    const user = `${redis.prefix.replace(/:$/, '')}-nochannels`;
    await redis.client.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', 'resetchannels', '+@all');
    const url = new URL(redis.url);
    url.username = user;
    url.password = 'pw';
    const g = await startServe({ REDIS_URL: url.toString(), REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile });
    try {
      const key = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
      expect((await request(g.url, LIST, bearer(key.key))).status).toBe(200);
      const disabled = await runCli(['keys', 'disable', key.id], { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix });
      expect(disabled.stderr).toMatch(/no running gateway received/i);
      const disabledAt = Date.now();
      await waitFor(async () => (await request(g.url, LIST, bearer(key.key))).status === 401, { what: 'the disable to be seen' });
      expect(Date.now() - disabledAt).toBeLessThan(2_000); // 1 s of trust at most, not the 30 s outage grace
      expect(JSON.parse((await request(g.adminUrl, '/readyz')).body.toString()).checks.key_store).toBe('no_change_notices');

      const problems = () => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === 'key_store_problem' && l.context === 'subscribing to key change notices');
      const second = await waitFor(() => problems()[1], { timeoutMs: KEY_STORE_PROBLEM_EVERY_MS + 3_000, what: 'the next line of the same problem' });
      const [first] = problems();
      expect(problems()).toHaveLength(2);
      expect((second.time as number) - (first!.time as number)).toBeGreaterThanOrEqual(KEY_STORE_PROBLEM_EVERY_MS - 100);
      expect(second.same_problems_unwritten).toBeGreaterThan(5);
      expect(JSON.stringify(problems())).not.toContain('pw@');
    } finally {
      await g.stop();
      await redis.client.call('ACL', 'DELUSER', user);
    }
  }, KEY_STORE_PROBLEM_EVERY_MS + 15_000);
});

describe('ADMIN_TOKEN', () => {
  it('makes /metrics and /readyz ask for it, leaves /healthz open, and is never logged', async () => {
    const token = 'admin-token-for-prometheus-0123';
    secrets.push(token);
    const g = await startServe({ REDIS_URL: relay.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile, LOG_LEVEL: 'debug', ADMIN_TOKEN: token });
    try {
      const bearerToken = { authorization: `Bearer ${token}` };
      await waitFor(async () => (await request(g.adminUrl, '/readyz', bearerToken)).status === 200, { what: 'readiness' });
      for (const path of ['/metrics', '/readyz']) {
        const refused = await adminGet(g, path);
        expect([refused.status, refused.body.toString()]).toEqual([401, '{"message":"Invalid authentication information"}']);
      }
      expect((await request(g.adminUrl, '/metrics', bearerToken)).body.toString()).toContain('acquirer_gateway_requests_total');
      expect((await adminGet(g, '/healthz')).status).toBe(200);
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });

  it('refuses a token too short to guess at, without echoing it', async () => {
    const result = await runCli(['serve'], { ...env, UPSTREAM_URL: upstream.url, ADMIN_TOKEN: 'short-one' });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('ADMIN_TOKEN');
    expect(result.stderr).not.toContain('short-one');
  });
});

describe('a retired setting', () => {
  it('is ignored, and said so once at start-up with what took its place', async () => {
    const g = await startServe({ REDIS_URL: relay.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile, KEY_NEGATIVE_CACHE_TTL_MS: '5000' });
    try {
      const retired = g.logLines.map((line) => JSON.parse(line)).filter((e) => e.event === 'setting_retired');
      expect(retired).toEqual([expect.objectContaining({ level: 40, setting: 'KEY_NEGATIVE_CACHE_TTL_MS', instead: expect.stringContaining('KEY_CACHE_TTL_MS') })]);
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });
});

describe('connections', () => {
  it('closes a connection past MAX_CONNECTIONS as it is accepted, counts it, says so, and serves again once one goes', async () => {
    const g = await serve({ MAX_CONNECTIONS: '2' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    secrets.push(key);
    const connect = () =>
      new Promise<net.Socket>((resolve, reject) => {
        const socket = net.connect(g.port, '127.0.0.1', () => resolve(socket));
        socket.on('error', reject);
      });
    const held = [await connect(), await connect()];
    try {
      // Accepted in order: the two held are the gateway's, the third is past the limit.
      const third = net.connect(g.port, '127.0.0.1');
      const answered: Buffer[] = [];
      third.on('data', (d: Buffer) => answered.push(d));
      third.on('error', () => {});
      third.write(`GET ${LIST} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key}\r\n\r\n`);
      await new Promise((resolve) => third.once('close', resolve));
      expect(Buffer.concat(answered).length).toBe(0);
      expect(metricValue(await metricsText(g), 'acquirer_gateway_connections_dropped_total')).toBe(1);
      const warned = await waitFor(() => g.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'connections_dropped'), { what: 'the warning' });
      expect(warned).toMatchObject({ level: 40, limit: 2, dropped: 1 });
      held.shift()!.destroy();
      await waitFor(async () => (await request(g.url, LIST, bearer(key)).catch(() => ({ status: 0 }))).status === 200, { what: 'a request served once a connection went' });
    } finally {
      for (const socket of held) socket.destroy();
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });
});

describe("each acquirer's share of the upstream", () => {
  it('answers 429 with Retry-After to an acquirer past ACQUIRER_MAX_IN_FLIGHT, never asking the upstream, while another is served', async () => {
    const g = await serve({ ACQUIRER_MAX_IN_FLIGHT: '1' });
    const [busy, other] = [
      await createKey(env, { acquirer: 'acq_busy', permissions: ['eod_list', 'eod_read'] }),
      await createKey(env, { acquirer: 'acq_other', permissions: ['eod_list', 'eod_read'] }),
    ];
    secrets.push(busy.key, other.key);
    try {
      const { done } = await startSlowDownload(g, busy.key);
      const asked = upstream.received.length;
      const refused = await request(g.url, LIST, bearer(busy.key));
      expect([refused.status, refused.body.toString(), refused.headers['retry-after'], refused.headers['content-type']]).toEqual([
        429,
        '{"message":"Too many requests"}',
        '1',
        'application/json; charset=utf-8',
      ]);
      expect(upstream.received.length).toBe(asked);
      // A request that would not have gone upstream is judged as ever: no share is asked of it (and
      // the catalogue, forwarding nothing, takes any query).
      expect((await request(g.url, `${PERMISSIONS}?_=1700000000`, bearer(busy.key))).status).toBe(200);
      expect((await request(g.url, LIST, bearer(other.key))).status).toBe(200);
      finishSlow!();
      finishSlow = undefined;
      expect((await done).status).toBe(200);
      expect((await request(g.url, LIST, bearer(busy.key))).status).toBe(200);
      const metrics = await metricsText(g);
      expect(metricValue(metrics, 'acquirer_gateway_denials_total', { reason: 'too_many_in_flight' })).toBe(1);
      expect(metricValue(metrics, 'acquirer_gateway_requests_total', { route: 'eod_statements_list', status: '429' })).toBe(1);
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });
});

describe('live policy changes', () => {
  let key: string;
  beforeAll(async () => {
    const created = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    key = created.key;
    secrets.push(key);
  });

  const withoutCatalogueRoute = () =>
    readFileSync('policies/acquirer-api.yaml', 'utf8').replace(/\n  - id: api_keys_permissions[\s\S]*$/, '\n');

  it('reloads on file change; a broken file is refused and traffic goes on under the running policy', async () => {
    copyFileSync('policies/acquirer-api.yaml', policyFile);
    const g = await serve();
    try {
      expect((await request(g.url, PERMISSIONS, bearer(key))).status).toBe(200);
      writeFileSync(policyFile, withoutCatalogueRoute());
      await waitFor(async () => (await request(g.url, PERMISSIONS, bearer(key))).status === 404, { what: 'the reload' });
      expect(metricValue(await metricsText(g), 'acquirer_gateway_policy_reloads_total', { result: 'success' })).toBe(1);

      writeFileSync(policyFile, withoutCatalogueRoute().replace('permissions: [eod_list, eod_read]', 'permissions: [eod_list, eod_raed]'));
      await waitFor(async () => metricValue(await metricsText(g), 'acquirer_gateway_policy_reloads_total', { result: 'failure' }) === 1, { what: 'the refusal' });
      expect((await request(g.url, LIST, bearer(key))).status).toBe(200);
      expect((await request(g.url, PERMISSIONS, bearer(key))).status).toBe(404);
      // Log lines reach stdout in blocks, at most 200 ms late.
      const refusal = await waitFor(() => g.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'policy_reload_refused'), { what: 'the refusal in the log' });
      expect(refusal.errors).toEqual([expect.stringMatching(/policy\.yaml:\d+:\d+: routes\.0\.permissions\.1: unknown permission "eod_raed"/)]);
      expect((await adminGet(g, '/readyz')).status).toBe(200);
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });

  it('reloads when the directory that holds the file is replaced whole, which raises no event where it watched', async () => {
    const dir = path.join(policyDir, 'replaced');
    mkdirSync(dir);
    const file = path.join(dir, 'policy.yaml');
    copyFileSync('policies/acquirer-api.yaml', file);
    const g = await serve({ POLICY_FILE: file });
    try {
      expect((await request(g.url, PERMISSIONS, bearer(key))).status).toBe(200);
      renameSync(dir, `${dir}.old`);
      mkdirSync(dir);
      writeFileSync(file, withoutCatalogueRoute());
      await waitFor(async () => (await request(g.url, PERMISSIONS, bearer(key))).status === 404, { timeoutMs: 10_000, what: 'the reload' });
      expect(metricValue(await metricsText(g), 'acquirer_gateway_policy_reloads_total', { result: 'success' })).toBe(1);
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
      rmSync(`${dir}.old`, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);

  it('reloads on SIGHUP; a request in flight finishes under the policy it started with', async () => {
    copyFileSync('policies/acquirer-api.yaml', policyFile);
    const g = await serve({ POLICY_WATCH: 'false' });
    try {
      // Start a download, then take its route away while it streams.
      const download = (await startSlowDownload(g, key)).done;
      writeFileSync(policyFile, withoutCatalogueRoute().replace(/\n  - id: eod_statement_download\n[\s\S]*?permissions: \[eod_list, eod_read\]\n/, '\n'));
      expect((await request(g.url, PERMISSIONS, bearer(key))).status).toBe(200); // not watching: unchanged
      g.child.kill('SIGHUP');
      await waitFor(async () => (await request(g.url, PERMISSIONS, bearer(key))).status === 404, { what: 'the SIGHUP reload' });
      expect((await request(g.url, CSV, bearer(key))).status).toBe(404); // new requests: new policy
      finishSlow!();
      finishSlow = undefined;
      expect(await download).toEqual({ status: 200, body: 'first,part\r\nlast,part\r\n' });
    } finally {
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });
});

describe('shutdown', () => {
  it('SIGTERM: readiness drops, new connections are refused, a download in flight finishes, exit 0', async () => {
    copyFileSync('policies/acquirer-api.yaml', policyFile);
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '10000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    secrets.push(key);
    const download = (await startSlowDownload(g, key)).done;
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    await waitFor(async () => (await adminGet(g, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'readiness to drop' });
    await expect(request(g.url, LIST, bearer(key))).rejects.toThrow(/ECONNREFUSED/);
    finishSlow!();
    finishSlow = undefined;
    expect(await download).toEqual({ status: 200, body: 'first,part\r\nlast,part\r\n' });
    expect(await exited).toBe(0);
    // Written in the last moments before exit: log lines still buffered are flushed on the way out.
    const line = await waitFor(() => g.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'request' && e.path === CSV), { what: 'the download\'s access line' });
    expect(line).toMatchObject({ status: 200, decision: 'allowed', completed: true });
    allLogLines.push(...g.logLines);
  }, 20_000);

  it('SIGTERM: a keep-alive connection is closed once its response is done, well before the deadline', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '60000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const get = (p: string) =>
      new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port: g.port, path: p, agent, headers: bearer(key) }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, body, connection: res.headers.connection }));
        }).on('error', reject);
      });
    expect((await get(LIST)).connection).toBe('keep-alive');
    const download = get(CSV);
    await waitFor(() => finishSlow !== undefined, { what: 'the download to start' });
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    await waitFor(async () => (await adminGet(g, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'draining' });
    finishSlow!();
    finishSlow = undefined;
    expect((await download).status).toBe(200);
    // The connection is closed behind the finished download: the next request on it cannot be served
    // (a busy client would otherwise keep it, and the process, alive until the deadline).
    await expect(get(LIST)).rejects.toThrow(/ECONNREFUSED|ECONNRESET|socket hang up/);
    expect(await exited).toBe(0);
    agent.destroy();
    allLogLines.push(...g.logLines);
  }, 15_000);

  it('SIGTERM: the last answer still to start on a connection says Connection: close, and every one is answered', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '60000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const HELD = '/v1/acquirer/eod_statements/by_date/2000-01-01.csv';
    const head = (p: string) => `GET ${p} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const connection = (bytes: string) => sendUntilServerCloses(g.port, bytes);
    const alone = connection(head(HELD));
    const pipelined = connection(head(HELD) + head(LIST)); // the list waits behind the held answer
    // Answers the gateway writes itself, behind a held one: the catalogue, and a refused expectation.
    const catalogue = connection(head(HELD) + head(PERMISSIONS));
    const expectation = connection(head(HELD) + `GET ${LIST} HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n`);
    await waitFor(() => held.length === 4, { what: 'the held requests to reach the upstream' });
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    await waitFor(async () => (await adminGet(g, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'draining' });
    for (const release of held.splice(0)) release();
    const [one] = parseRawResponses(await alone);
    expect(one).toMatchObject({ status: 200, body: 'held\r\n' });
    expect(one!.headers.connection).toBe('close');
    const [first, second, ...none] = parseRawResponses(await pipelined);
    expect(first).toMatchObject({ status: 200, body: 'held\r\n' });
    expect(first!.headers.connection).toBe('keep-alive'); // closing here would drop the answer behind it
    expect(second).toMatchObject({ status: 200, body: '{"eod_statements":[]}' });
    expect(second!.headers.connection).toBe('close');
    expect(none).toEqual([]);
    for (const [answers, status] of [[await catalogue, 200], [await expectation, 400]] as const) {
      const [before, last, ...more] = parseRawResponses(answers);
      expect([before!.status, before!.headers.connection]).toEqual([200, 'keep-alive']);
      expect([last!.status, last!.headers.connection]).toEqual([status, 'close']);
      expect(more).toEqual([]);
    }
    expect(await exited).toBe(0);
    allLogLines.push(...g.logLines);
  }, 20_000);

  it('at the deadline, an answer framed only by its connection (HTTP/1.0) is reset, never closed as if whole', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '500' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const { socket, received, ending } = openRaw(g.port);
    socket.write(`GET ${CSV} HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await waitFor(() => finishSlow !== undefined && received().includes('first,part'), { what: 'the download to stream' });
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    expect(await ending).toBe('ECONNRESET');
    expect(received()).not.toMatch(/^content-length:/im);
    expect(await exited).toBe(0);
    finishSlow = undefined;
    allLogLines.push(...g.logLines);
  }, 15_000);

  it('a malformed request behind an answer not yet started closes the connection, and is never answered in that answer\'s place', async () => {
    const g = await serve();
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    try {
      const HELD = '/v1/acquirer/eod_statements/by_date/2000-01-01.csv';
      const answered = sendUntilServerCloses(g.port, `GET ${HELD} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\nGET /bad path HTTP/1.1\r\nHost: a\r\n\r\n`);
      // Written first, the 400 would read as the answer to the valid request before it.
      expect(await answered).toBe('');
    } finally {
      for (const release of held.splice(0)) release();
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  });

  it('a request head that times out behind an HTTP/1.0 download resets it, never closes it as if whole', async () => {
    const g = await serve({ HEADERS_TIMEOUT_MS: '1000', REQUEST_TIMEOUT_MS: '1000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    try {
      const { socket, received, ending } = openRaw(g.port);
      // A keep-alive HTTP/1.0 download framed by its connection, then the start of a head never finished.
      socket.write(`GET ${CSV} HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer ${key}\r\n\r\nGET ${LIST} HTTP/1.1\r\nHost: a\r\n`);
      expect(await ending).toBe('ECONNRESET');
      expect(received()).toContain('first,part');
      expect(received()).not.toMatch(/^content-length:/im);
    } finally {
      finishSlow = undefined;
      await g.stop();
      allLogLines.push(...g.logLines);
    }
  }, 15_000);

  it('SIGTERM: a request whose head is half-received is still answered, with Connection: close', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '10000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const request = `GET ${LIST} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const socket = net.connect(g.port, '127.0.0.1');
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    const ended = new Promise<void>((resolve, reject) => {
      socket.on('end', () => resolve());
      socket.on('error', reject);
    });
    await new Promise<void>((resolve) => socket.write(request.slice(0, 40), () => resolve()));
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    await waitFor(async () => (await adminGet(g, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'draining' });
    socket.write(request.slice(40));
    await ended;
    const [answer, ...more] = parseRawResponses(received);
    expect([answer?.status, answer?.headers.connection]).toEqual([200, 'close']);
    expect(more).toEqual([]);
    expect(await exited).toBe(0);
    allLogLines.push(...g.logLines);
  }, 20_000);

  it('a second signal exits at once', async () => {
    const g = await serve({ SHUTDOWN_TIMEOUT_MS: '60000' });
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const download = (await startSlowDownload(g, key)).done.catch(() => undefined); // cut by the second signal
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
    g.child.kill('SIGTERM');
    await waitFor(async () => (await adminGet(g, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'draining' });
    g.child.kill('SIGTERM');
    expect(await exited).toBe(1);
    await download;
    finishSlow = undefined;
    allLogLines.push(...g.logLines);
  }, 20_000);
});

describe('logs', () => {
  it('a throw outside any request ends the process with exit 1, said as a JSON line without the key', async () => {
    const g = await startServe({ ...env, UPSTREAM_URL: upstream.url, POLICY_FILE: policyFile, THROW_ON_SIGUSR2: '1' }, { script: 'test/fixtures/gated-serve.mjs' });
    const exited = new Promise<number | null>((resolve) => g.child.once('exit', (code) => resolve(code)));
    g.child.kill('SIGUSR2');
    expect(await exited).toBe(1);
    const fatal = await waitFor(() => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.event === 'uncaught_exception'), {
      what: 'the fatal line',
      timeoutMs: 3000,
    });
    expect(fatal).toMatchObject({ level: 60, err: { message: 'a fault outside any request, quoting acquirer_key_[redacted]' } });
    expect(g.stderr()).not.toContain('Q'.repeat(43));
    for (const line of g.logLines) expect(line).not.toContain('Q'.repeat(43));
  });

  it('never hold a key, whatever clients sent', async () => {
    const g = await serve();
    const { key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    secrets.push(key);
    await request(g.url, `${LIST}?api_key=${key}`, bearer(key));
    await request(g.url, LIST, { authorization: `Basic ${key}` });
    await request(g.url, `/v1/acquirer/${key}`, bearer(key));
    await request(g.url, LIST, { authorization: [`Bearer ${key}`, `Bearer ${key}`] as unknown as string });
    await g.stop();
    allLogLines.push(...g.logLines);
    expect(allLogLines.length).toBeGreaterThan(20);
    expect(allLogLines.some((l) => l.includes('acquirer_key_[redacted]'))).toBe(true);
    for (const line of allLogLines) {
      for (const secret of secrets) expect(line).not.toContain(secret.slice('acquirer_key_'.length));
    }
  });
});
