import { spawn } from 'node:child_process';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createSampleUpstream, sampleStatements } from '../../src/demo/sample-upstream.js';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request, type HttpResult } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { headerValues, startUpstream, type ReceivedRequest, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * ACQUIRER_SIGNING_SECRET as an operator runs it: `serve` against real upstreams, a recording one
 * and the sample service checking signatures, with the verifier of docs/security.md.
 */
const LIST = '/v1/acquirer/eod_statements';
const NEW = 'new-secret-0123456789abcdefghijklmnop';
const OLD = 'old-secret-0123456789abcdefghijklmnop';
const NEXT = 'next-secret-0123456789abcdefghijklmno';
const OTHER = 'other-secret-0123456789abcdefghijklmn';
const FORGED = { 'x-acquirer-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`, 'x-acquirer-key-id': 'key_ffffffffffffffffffff' };
const JSON_TYPE = 'application/json; charset=utf-8';

type Verify = (req: { method: string; url: string; headers: http.IncomingHttpHeaders }, secrets: string[]) => boolean;
let verifyAcquirerSignature: Verify;
let redis: TestRedis;
let recording: RecordingUpstream;
let sample: http.Server;
let key: { id: string; key: string };
/** Each gateway by what it signs with, and where it sends. */
let rotating: ServeProcess;
let unsigned: ServeProcess;
let toSample: ServeProcess;
let toSampleRotated: ServeProcess;
let toSampleWrong: ServeProcess;

beforeAll(async () => {
  ({ verifyAcquirerSignature } = await import(pathToFileURL(path.resolve('docs/verify-acquirer-signature.mjs')).href));
  redis = await startTestRedis();
  recording = await startUpstream();
  // The backend knows NEW only.
  sample = createSampleUpstream(sampleStatements(['acq_alpha']), { signingSecret: NEW });
  await new Promise<void>((resolve) => sample.listen(0, '127.0.0.1', resolve));
  const sampleUrl = `http://127.0.0.1:${(sample.address() as AddressInfo).port}`;
  const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  key = await createKey(env, { acquirer: 'acq_alpha', permissions: ['eod_list', 'eod_read'] });
  const serve = (upstream: string, secret?: string) => startServe({ ...env, UPSTREAM_URL: upstream, ...(secret === undefined ? {} : { ACQUIRER_SIGNING_SECRET: secret }) });
  [rotating, unsigned, toSample, toSampleRotated, toSampleWrong] = await Promise.all([
    serve(recording.url, `${NEW},${OLD}`),
    serve(recording.url),
    serve(sampleUrl, NEW),
    serve(sampleUrl, `${NEXT},${NEW}`),
    serve(sampleUrl, OTHER),
  ]);
  // Ready as a balancer would see it: Redis answers lookups.
  for (const gateway of [rotating, unsigned, toSample, toSampleRotated, toSampleWrong]) {
    await waitFor(async () => (await request(gateway.adminUrl, '/readyz')).status === 200, { what: 'readiness' });
  }
}, 30_000);

afterAll(() =>
  stopAll(
    ...[rotating, unsigned, toSample, toSampleRotated, toSampleWrong].map((gateway) => () => gateway?.stop()),
    () => recording?.close(),
    () => (sample === undefined ? undefined : (sample.closeAllConnections(), new Promise((resolve) => sample.close(resolve)))),
    () => redis?.stop(),
  ),
);

const get = (gateway: ServeProcess, target = LIST, headers: http.OutgoingHttpHeaders = {}) => request(gateway.url, target, { ...bearer(key.key), ...headers });

/** The request the recording upstream received for a gateway's answer, found by its request id. */
function receivedFor(res: HttpResult): ReceivedRequest {
  const found = recording.received.filter((r) => r.headers['x-request-id'] === res.headers['x-request-id']);
  expect(found).toHaveLength(1);
  return found[0]!;
}

describe('with ACQUIRER_SIGNING_SECRET', () => {
  it('sends the upstream a signature of the second it forwarded, and the key id, that verify with each of its two secrets', async () => {
    const before = Math.floor(Date.now() / 1000);
    const res = await get(rotating, `${LIST}?page=2`);
    const after = Math.floor(Date.now() / 1000);
    expect(res.status).toBe(200);
    const got = receivedFor(res);
    expect(got.url).toBe(`${LIST}?page=2`);
    const [signature, ...more] = headerValues(got.rawHeaders, 'x-acquirer-signature');
    expect(more).toEqual([]);
    const [, t] = /^t=(\d+),v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/.exec(signature!)!;
    expect(Number(t)).toBeGreaterThanOrEqual(before);
    expect(Number(t)).toBeLessThanOrEqual(after);
    expect(headerValues(got.rawHeaders, 'x-acquirer-key-id')).toEqual([key.id]);
    expect(headerValues(got.rawHeaders, 'x-acquirer-id')).toEqual(['acq_alpha']);
    expect(verifyAcquirerSignature(got, [NEW])).toBe(true);
    expect(verifyAcquirerSignature(got, [OLD])).toBe(true);
    expect(verifyAcquirerSignature(got, [OTHER])).toBe(false);
  });

  it("replaces a client's signature and key id with its own: the client's never reach the upstream", async () => {
    const res = await get(rotating, LIST, { ...FORGED, 'X_Acquirer_Signature': FORGED['x-acquirer-signature'] });
    expect(res.status).toBe(200);
    const got = receivedFor(res);
    const signatures = headerValues(got.rawHeaders, 'x-acquirer-signature');
    expect(signatures).toHaveLength(1);
    expect(signatures[0]).not.toBe(FORGED['x-acquirer-signature']);
    expect(headerValues(got.rawHeaders, 'x-acquirer-key-id')).toEqual([key.id]);
    expect(headerValues(got.rawHeaders, 'x_acquirer_signature')).toEqual([]);
    expect(verifyAcquirerSignature(got, [NEW])).toBe(true);
  });

  it('lets the sample service answer (200), during a rotation too, and gives the client the 502 when the secrets differ', async () => {
    for (const gateway of [toSample, toSampleRotated]) {
      const res = await get(gateway);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString()).eod_statements).toHaveLength(3);
    }
    // The sample's 401 "bad signature" is the gateway's standing upstream: its documented 502.
    for (const headers of [{}, FORGED]) {
      const res = await get(toSampleWrong, LIST, headers);
      expect(res.status).toBe(502);
      expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  it('never writes a secret to its log', async () => {
    const gateways = [rotating, toSample, toSampleRotated, toSampleWrong];
    expect((await Promise.all(gateways.map((gateway) => get(gateway)))).map((res) => res.status)).toEqual([200, 200, 200, 502]);
    // An access line is written once its answer has ended.
    await waitFor(() => gateways.every((gateway) => gateway.logLines.some((line) => line.includes('"event":"request"'))), { what: 'the access lines' });
    const logs = gateways.flatMap((gateway) => [...gateway.logLines, gateway.stderr()]).join('\n');
    for (const secret of [NEW, OLD, NEXT, OTHER]) expect(logs).not.toContain(secret);
  });
});

describe('without ACQUIRER_SIGNING_SECRET', () => {
  it("sends neither header, and none of a client's copies", async () => {
    for (const headers of [{}, FORGED]) {
      const res = await get(unsigned, LIST, headers);
      expect(res.status).toBe(200);
      const got = receivedFor(res);
      expect(headerValues(got.rawHeaders, 'x-acquirer-signature')).toEqual([]);
      expect(headerValues(got.rawHeaders, 'x-acquirer-key-id')).toEqual([]);
      expect(headerValues(got.rawHeaders, 'x-acquirer-id')).toEqual(['acq_alpha']);
    }
  });
});

describe('a bad ACQUIRER_SIGNING_SECRET', () => {
  it.each([
    ['too short', 'short-but-secret-value', 'the secret is shorter than 32 characters'],
    ['three secrets', `${NEW},${OLD},${NEXT}`, 'holds 3 comma-separated secrets; at most 2'],
    ['white space', `${NEW}, ${OLD}`, 'the second secret holds white space or a control character'],
  ])('(%s) stops serve with exit 2 and a line naming the variable, never the value', async (_what, value, message) => {
    const result = await runCli(['serve'], { UPSTREAM_URL: recording.url, REDIS_URL: redis.url, ACQUIRER_SIGNING_SECRET: value });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`ACQUIRER_SIGNING_SECRET: ${message}`);
    for (const secret of value.split(/[\s,]+/)) expect(result.stderr + result.stdout).not.toContain(secret);
  });
});

describe('npm start with ACQUIRER_SIGNING_SECRET', () => {
  it('starts the sample service checking what the gateway signs, and its commands still answer', async () => {
    const child = spawn(process.execPath, [path.resolve('dist/demo/quickstart.js')], {
      env: { PATH: process.env.PATH, PORT: '0', REDIS_URL: 'redis://127.0.0.1:1', ACQUIRER_SIGNING_SECRET: `${NEW},${OLD}` },
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await waitFor(() => output.includes('# no key: 401'), { timeoutMs: 10_000, what: 'the quickstart to print its commands' });
      expect(output).toContain('(ACQUIRER_SIGNING_SECRET: the sample service refuses a request the gateway did not sign)');
      const [, url, demoKey] = /curl -s (http:\/\/\S+\/v1\/acquirer\/eod_statements) -H 'Authorization: Bearer (\S+)'/.exec(output)!;
      const target = new URL(url!);
      const res = await request(target.origin, target.pathname, bearer(demoKey!));
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body.toString()).eod_statements).toHaveLength(3);
      // Asked directly, past the gateway, the sample service refuses.
      const [, samplePort] = /sample acquirer service on 127\.0\.0\.1:(\d+)/.exec(output)!;
      const direct = await request(`http://127.0.0.1:${samplePort}`, LIST, { 'x-acquirer-id': 'acq_alpha' });
      expect([direct.status, direct.body.toString()]).toEqual([401, '{"message":"bad signature"}']);
    } finally {
      child.kill('SIGINT');
      await exited;
    }
  });

  it('refuses a bad one, naming the variable and not the value', async () => {
    const child = spawn(process.execPath, [path.resolve('dist/demo/quickstart.js')], { env: { PATH: process.env.PATH, PORT: '0', ACQUIRER_SIGNING_SECRET: 'short-but-secret-value' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toBe('quickstart failed: ACQUIRER_SIGNING_SECRET: the secret is shorter than 32 characters\n');
  });
});
