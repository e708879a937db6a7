import http from 'node:http';
import { createKey, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request, type HttpResult } from '../helpers/http.js';
import { openRaw, parseRawResponse, sendRaw } from '../helpers/raw.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { stopAll } from '../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Write routes as an operator runs them (`serve`, a real Redis, a real upstream that records the
 * bytes it receives): a body arrives upstream exactly as sent, framed by its length, or is refused
 * before anything goes upstream.
 */
const USERS = (merchant: string) => `/v1/acquirer/merchants/${merchant}/users`;
const REQUEST_TIMEOUT_MS = 1000;
const USER_ID = '0e6b4c52-2a0a-4f59-9b0e-5d3c3c9f3a11';

let redis: TestRedis;
let upstream: RecordingUpstream;
let gateway: ServeProcess;
let key: string;
let readOnlyKey: string;

/** The upstream's answer, chosen by the merchant id of the path. */
function writeService(req: http.IncomingMessage, res: http.ServerResponse) {
  const merchant = /^\/v1\/acquirer\/merchants\/([^/]+)/.exec(req.url ?? '')?.[1] ?? '';
  const json = (status: number, body: string, headers: http.OutgoingHttpHeaders = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(body);
  };
  req.on('end', () => {
    switch (merchant) {
      case 'answer-204':
        res.writeHead(204);
        return void res.end();
      case 'answer-202':
        return json(202, '{"queued":true}');
      case 'answer-422':
        return json(422, '{"message":"Validation failed","errors":{"email":["is invalid"]}}');
      case 'answer-400-html':
        res.writeHead(400, { 'content-type': 'text/html' });
        return void res.end('<h1>Bad</h1> internal detail');
      case 'answer-422-huge':
        return json(422, JSON.stringify({ message: 'x'.repeat(70 * 1024) }));
      case 'answer-400-duplicate':
        return json(400, '{"message":"a","message":"b"}');
      case 'answer-422-internal':
        return json(422, JSON.stringify({ message: `see ${upstream.url}/v1/debug` }));
      case 'answer-403':
        return json(403, '{"error":"merchant of acq_2"}');
      case 'elsewhere':
        return json(201, '{"id":"1"}', { location: 'https://other.example/users/1' });
      case 'reset':
        return void req.socket.destroy();
      default:
        return json(201, JSON.stringify({ id: USER_ID }), { location: `${upstream.url}${req.url}/${USER_ID}` });
    }
  });
  req.resume();
}

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  upstream.handle(writeService);
  // One request of an acquirer under way at a time: a body being read holds the acquirer's share.
  const env = { REDIS_URL: redis.url, UPSTREAM_URL: upstream.url, REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), HEADERS_TIMEOUT_MS: '1000', ACQUIRER_MAX_IN_FLIGHT: '1' };
  key = (await createKey(env, { acquirer: 'acq_1', permissions: ['merchant_users_create', 'merchant_users_read', 'merchant_users_disable'] })).key;
  readOnlyKey = (await createKey(env, { acquirer: 'acq_1', permissions: ['merchant_users_read'] })).key;
  gateway = await startServe(env);
}, 30_000);

afterAll(() => stopAll(() => gateway?.stop(), () => upstream?.close(), () => redis?.stop()));

/** A POST with exactly these headers and body bytes. */
function post(path: string, body: Buffer | string, headers: http.OutgoingHttpHeaders): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${gateway.url}${path}`, { method: 'POST', headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A POST of the users route with the key, and the rest of the head and the body written raw. */
async function rawPost(rest: string): Promise<HttpResult> {
  const answer = parseRawResponse(await sendRaw(gateway.port, `POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n${rest}`));
  return { status: answer.status, headers: answer.headers, body: Buffer.from(answer.body, 'latin1') };
}

const JSON_HEADERS = () => ({ ...bearer(key), 'content-type': 'application/json' });
const USER = '{"name":"Ada Lovelace","email":"ada@example.com","permissions":["orders_read"],"amount":1e400}';

describe('a body that passes', () => {
  it('arrives upstream byte for byte, with its length, its media type, the acquirer and the Idempotency-Key', async () => {
    const before = upstream.received.length;
    const res = await post(USERS('m1'), USER, { ...JSON_HEADERS(), 'idempotency-key': 'k-1', 'content-type': 'application/json; charset=UTF-8', 'accept-encoding': 'gzip' });
    expect(res.status).toBe(201);
    expect(res.body.toString()).toBe(JSON.stringify({ id: USER_ID }));
    // On the upstream's own origin: made relative.
    expect(res.headers.location).toBe(`${USERS('m1')}/${USER_ID}`);
    const seen = upstream.received[before]!;
    await seen.bodyEnded;
    expect(seen.body().toString()).toBe(USER);
    expect(seen.headers).toMatchObject({
      'content-length': String(Buffer.byteLength(USER)),
      'content-type': 'application/json; charset=UTF-8',
      'idempotency-key': 'k-1',
      'x-acquirer-id': 'acq_1',
      // Uncompressed, so that an explanation can be read and passed.
      'accept-encoding': 'identity',
    });
    expect(seen.headers['transfer-encoding']).toBeUndefined();
    expect(seen.headers.expect).toBeUndefined();
  });

  it('sent in chunks, arrives with its length', async () => {
    const before = upstream.received.length;
    const body = `{"name":"Ada","email":"ada@example.com","description":"${'é'.repeat(3000)}"}`;
    const res = await new Promise<HttpResult>((resolve, reject) => {
      const req = http.request(`${gateway.url}${USERS('m1')}`, { method: 'POST', headers: { ...JSON_HEADERS(), 'transfer-encoding': 'chunked' }, agent: false }, (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.on('end', () => resolve({ status: answer.statusCode!, headers: answer.headers, body: Buffer.concat(chunks) }));
      });
      req.on('error', reject);
      const bytes = Buffer.from(body);
      for (let i = 0; i < bytes.length; i += 1000) req.write(bytes.subarray(i, i + 1000));
      req.end();
    });
    expect(res.status).toBe(201);
    const seen = upstream.received[before]!;
    await seen.bodyEnded;
    expect(seen.body().equals(Buffer.from(body))).toBe(true);
    expect(seen.headers['content-length']).toBe(String(Buffer.byteLength(body)));
    expect(seen.headers['transfer-encoding']).toBeUndefined();
  });

  it('with Expect: 100-continue, is asked for once the head is judged, then forwarded', async () => {
    const before = upstream.received.length;
    const connection = openRaw(gateway.port);
    connection.socket.write(
      `POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${USER.length}\r\nExpect: 100-continue\r\n\r\n`,
    );
    await waitFor(() => connection.received().startsWith('HTTP/1.1 100 Continue\r\n\r\n') || undefined);
    expect(upstream.received.length).toBe(before);
    connection.socket.write(USER);
    await waitFor(() => connection.received().includes(USER_ID) || undefined);
    expect(parseRawResponse(connection.received().slice('HTTP/1.1 100 Continue\r\n\r\n'.length)).status).toBe(201);
    connection.socket.destroy();
    await upstream.received[before]!.bodyEnded;
    expect(upstream.received[before]!.body().toString()).toBe(USER);
  });
});

describe('a refused body never reaches the upstream', () => {
  const refusals: [string, () => Promise<HttpResult>, number, string][] = [
    ['no Content-Type', () => post(USERS('m1'), USER, bearer(key)), 415, 'Unsupported media type'],
    ['text/plain', () => post(USERS('m1'), USER, { ...bearer(key), 'content-type': 'text/plain' }), 415, 'Unsupported media type'],
    ['charset=utf-16', () => post(USERS('m1'), USER, { ...bearer(key), 'content-type': 'application/json; charset=utf-16' }), 415, 'Unsupported media type'],
    ['multipart/form-data', () => post(USERS('m1'), '--x\r\n\r\n--x--', { ...bearer(key), 'content-type': 'multipart/form-data; boundary=x' }), 415, 'Unsupported media type'],
    ['two Content-Type lines', () => rawPost(`Content-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: ${USER.length}\r\n\r\n${USER}`), 415, 'Unsupported media type'],
    ['malformed JSON', () => post(USERS('m1'), '{"name":', JSON_HEADERS()), 400, 'Bad request'],
    ['a byte-order mark', () => post(USERS('m1'), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(USER)]), JSON_HEADERS()), 400, 'Bad request'],
    ['invalid UTF-8', () => post(USERS('m1'), Buffer.from([0x22, 0xc0, 0xaf, 0x22]), JSON_HEADERS()), 400, 'Bad request'],
    ['a name twice, hidden by an escape', () => post(USERS('m1'), '{"name":"a","n\\u0061me":"b"}', JSON_HEADERS()), 400, 'Bad request'],
    ['a tenant field in a nested array', () => post(USERS('m1'), '{"name":"a","roles":[{"scope":{"Acquirer_Id":"acq_2"}}]}', JSON_HEADERS()), 400, 'Bad request'],
    ['nesting deeper than 32', () => post(USERS('m1'), '['.repeat(33) + ']'.repeat(33), JSON_HEADERS()), 400, 'Bad request'],
    ['an empty body', () => post(USERS('m1'), '', { ...JSON_HEADERS(), 'content-length': '0' }), 400, 'Bad request'],
    ['a declared length over max_bytes', () => post(USERS('m1'), 'x'.repeat(16385), JSON_HEADERS()), 413, 'Payload too large'],
    ['a body on a route that takes none', () => request(gateway.url, `${USERS('m1')}/${USER_ID}/disable`, { ...JSON_HEADERS(), 'content-length': '2' }, 'PUT'), 400, 'Bad request'],
    ['no permission: 403 before anything of the body is judged', () => post(USERS('m1'), '{"acquirer_id":"x"}', { ...bearer(readOnlyKey), 'content-type': 'text/plain' }), 403, 'Unauthorized'],
  ];
  it.each(refusals)('%s', async (_, send, status, message) => {
    const before = upstream.received.length;
    const res = await send();
    expect([res.status, res.body.toString()]).toEqual([status, JSON.stringify({ message })]);
    expect(upstream.received.length).toBe(before);
  });

  it('over max_bytes in chunks: refused as the count passes the limit, the connection closed', async () => {
    const before = upstream.received.length;
    const connection = openRaw(gateway.port);
    connection.socket.write(`POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    connection.socket.write(`4000\r\n${'["x",'.padEnd(0x4000, ' ')}\r\n`);
    connection.socket.write(`10\r\n${' '.repeat(16)}\r\n`); // one past the limit: no end is ever sent
    expect(await connection.ending).toBe('end');
    const answer = parseRawResponse(connection.received());
    expect([answer.status, answer.body, answer.headers.connection]).toEqual([413, '{"message":"Payload too large"}', 'close']);
    expect(upstream.received.length).toBe(before);
  });

  it('with Expect: 100-continue and a refused head: the final answer, never 100, and the body is not read', async () => {
    const raw = await sendRaw(gateway.port, `POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n`);
    expect(raw.startsWith('HTTP/1.1 415 ')).toBe(true);
    expect(raw).not.toContain('100 Continue');
    expect(parseRawResponse(raw).headers.connection).toBe('close');
  });

  it('not all arrived within REQUEST_TIMEOUT_MS: 408, the connection closed', async () => {
    const before = upstream.received.length;
    const connection = openRaw(gateway.port);
    connection.socket.write(`POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${USER.length}\r\n\r\n${USER.slice(0, 10)}`);
    expect(await connection.ending).toBe('end');
    const answer = parseRawResponse(connection.received());
    expect([answer.status, answer.body, answer.headers.connection]).toEqual([408, '{"message":"Request timeout"}', 'close']);
    expect(upstream.received.length).toBe(before);
  }, 10_000);
});

describe("the acquirer's share", () => {
  it('is taken before a body is read: while one body arrives, the next write is 429 unread', async () => {
    const before = upstream.received.length;
    const slow = openRaw(gateway.port);
    slow.socket.write(`POST ${USERS('m1')} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${USER.length}\r\nExpect: 100-continue\r\n\r\n`);
    // The 100 says the share was taken and the body is being read.
    await waitFor(() => slow.received().startsWith('HTTP/1.1 100 Continue') || undefined);
    const busy = await rawPost(`Content-Type: application/json\r\nContent-Length: ${USER.length}\r\nExpect: 100-continue\r\n\r\n`);
    expect([busy.status, busy.body.toString(), busy.headers['retry-after']]).toEqual([429, '{"message":"Too many requests"}', '1']);
    expect(upstream.received.length).toBe(before);
    slow.socket.write(USER);
    await waitFor(() => slow.received().includes(USER_ID) || undefined);
    slow.socket.destroy();
    expect(upstream.received.length).toBe(before + 1);
  });
});

describe("the upstream's answers to a write", () => {
  it.each([
    ['answer-204', 204, ''],
    ['answer-202', 202, '{"queued":true}'],
    ['answer-422', 422, '{"message":"Validation failed","errors":{"email":["is invalid"]}}'],
    ['answer-400-html', 400, '{"message":"Bad request"}'],
    ['answer-400-duplicate', 400, '{"message":"Bad request"}'],
    ['answer-422-huge', 422, '{"message":"Unprocessable entity"}'],
    // Another acquirer's merchant, as the legacy service says it: exactly a missing one, for a write too.
    ['answer-403', 404, '{"message":"Not found"}'],
    // An explanation that names the upstream's own address is not passed, as a header naming it is not.
    ['answer-422-internal', 422, '{"message":"Unprocessable entity"}'],
  ])('%s: %i %s', async (merchant, status, body) => {
    const res = await post(USERS(merchant), USER, JSON_HEADERS());
    expect([res.status, res.body.toString()]).toEqual([status, body]);
    if (status === 422 || status === 400) expect(res.headers['content-type']).toMatch(/^application\/json/);
  });

  it('drops a 201 Location on another origin', async () => {
    const res = await post(USERS('elsewhere'), USER, JSON_HEADERS());
    expect(res.status).toBe(201);
    expect(res.headers.location).toBeUndefined();
  });

  it('never sends a POST a second time: a failed connection is a 502', async () => {
    const before = upstream.received.filter((r) => r.url.includes('/reset/')).length;
    const res = await post(USERS('reset'), USER, JSON_HEADERS());
    expect([res.status, res.body.toString()]).toEqual([502, '{"message":"Bad gateway"}']);
    expect(upstream.received.filter((r) => r.url.includes('/reset/')).length).toBe(before + 1);
  });
});

describe('what operators see', () => {
  it('an audit line for each write, with the body size and never the body, and the body size histogram', async () => {
    const res = await post(USERS('m1'), '{"name":"Grace","email":"grace@example.com"}', JSON_HEADERS());
    const requestId = String(res.headers['x-request-id']);
    const audit = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'audit' && l.request_id === requestId));
    expect(audit).toMatchObject({ route: 'merchant_users_create', method: 'POST', path: USERS('m1'), status: 201, acquirer_id: 'acq_1', client: '127.0.0.1', body_bytes: 44 });
    expect(gateway.logLines.join('\n')).not.toContain('grace@example.com');
    // Refused before the app, by the HTTP server's edge: audited all the same.
    const refused = await rawPost(`Content-Type: application/json\r\nContent-Length: 2\r\nExpect: something-else\r\n\r\n{}`);
    const edgeAudit = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'audit' && l.request_id === refused.headers['x-request-id']));
    expect(edgeAudit).toMatchObject({ method: 'POST', path: USERS('m1'), route: null, status: 400, key_id: null, body_bytes: null });
    // Read whole, then refused by its check: the size read is audited, and never the body.
    const tenant = '{"name":"Eve","acquirer_id":"acq_2"}';
    const named = await post(USERS('m1'), tenant, JSON_HEADERS());
    expect([named.status, named.body.toString()]).toEqual([400, '{"message":"Bad request"}']);
    const namedAudit = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === 'audit' && l.request_id === named.headers['x-request-id']));
    expect(namedAudit).toMatchObject({ route: 'merchant_users_create', status: 400, acquirer_id: 'acq_1', body_bytes: Buffer.byteLength(tenant) });
    expect(gateway.logLines.join('\n')).not.toContain('"Eve"');
    const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
    expect(metrics).toMatch(/^acquirer_gateway_request_body_bytes_count\{route="merchant_users_create"\} [1-9]/m);
    for (const reason of ['payload_too_large', 'unsupported_media_type', 'malformed_body', 'tenant_field', 'request_timeout']) {
      expect(metrics).toMatch(new RegExp(`^acquirer_gateway_denials_total\\{reason="${reason}"\\} [1-9]`, 'm'));
    }
  });
});
