import http from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import nock from 'nock';
import request from 'supertest';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { STATEMENT_ID } from '../../helpers/policy.js';
import { waitFor } from '../../helpers/wait.js';

const UPSTREAM = 'http://statements.test';
const LIST = '/v1/acquirer/eod_statements';
const CSV = `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`;
const JSON_TYPE = 'application/json; charset=utf-8';

let t: TestApp;
let key: string;

beforeAll(() => {
  nock.disableNetConnect();
  nock.enableNetConnect(/127\.0\.0\.1|localhost|\[::1\]|^::1:/);
});
// Importing nock patches node:http and node:net for the whole jest worker process, not only this
// file: left in place, a later file in the same worker (a real-socket integration test) runs through
// its interceptor, which mishandles pipelined requests.
afterAll(() => {
  nock.enableNetConnect();
  nock.restore();
});

beforeEach(async () => {
  t = await createTestApp({ upstreamUrl: UPSTREAM, upstreamTimeoutMs: 200 });
  ({ key } = await t.addKey({ acquirer_id: 'acq_1' }));
});
afterEach(() => {
  t.close();
  const pending = nock.pendingMocks();
  nock.cleanAll();
  expect(pending).toEqual([]);
});

const get = (path: string) => request(t.app).get(path).set('Authorization', `Bearer ${key}`);

describe('proxying an allowed request (nock upstream)', () => {
  it('forwards path and query unchanged, one acquirer header, no credential; passes the answer through', async () => {
    const scope = nock(UPSTREAM, { badheaders: ['authorization'] })
      .get(`${LIST}?page=2`)
      .matchHeader('x-acquirer-id', 'acq_1')
      .reply(200, '{"eod_statements":[],"meta":{}}', { 'content-type': 'application/json', etag: '"abc"' });
    const res = await request(t.app)
      .get(`${LIST}?page=2`)
      .set('Authorization', `Bearer ${key}`)
      .set('X-Acquirer-Id', 'acq_evil')
      .set('x_acquirer_id', 'acq_evil');
    expect(res.status).toBe(200);
    expect(res.text).toBe('{"eod_statements":[],"meta":{}}');
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers.etag).toBe('"abc"');
    expect(res.headers['x-powered-by']).toBeUndefined();
    scope.done();
  });

  it('streams the CSV with the upstream content type', async () => {
    const csv = 'a,b\r\n1,2\r\n';
    nock(UPSTREAM).get(CSV).reply(200, csv, { 'content-type': 'text/csv; charset=utf-8' });
    const res = await get(CSV).buffer(true).parse((r, cb) => {
      let data = '';
      r.on('data', (c: Buffer) => (data += c.toString()));
      r.on('end', () => cb(null, data));
    });
    expect(res.status).toBe(200);
    expect(res.body).toBe(csv);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
  });

  it('frees streamed read buffers every 4 MiB of large bodies, and passes every byte on', async () => {
    t.close();
    let collections = 0;
    t = await createTestApp({ upstreamUrl: UPSTREAM, collectYoung: () => collections++ });
    ({ key } = await t.addKey({ acquirer_id: 'acq_1' }));
    const MiB = 1024 * 1024;
    // 9 MiB without a Content-Length (its size unknown: counted), in 64 KiB chunks with numbered bytes.
    const chunks = Array.from({ length: 144 }, (_, i) => Buffer.alloc(64 * 1024, i));
    nock(UPSTREAM).get(CSV).reply(200, () => Readable.from(chunks), { 'content-type': 'text/csv; charset=utf-8' });
    const res = await get(CSV).buffer(true).parse((r, cb) => {
      const parts: Buffer[] = [];
      r.on('data', (c: Buffer) => parts.push(c));
      r.on('end', () => cb(null, Buffer.concat(parts)));
    });
    expect(res.status).toBe(200);
    expect((res.body as Buffer).equals(Buffer.concat(chunks))).toBe(true);
    expect(collections).toBe(2); // 9 MiB: after 4 and after 8
  });

  it('serves the permission catalogue itself, to any valid key', async () => {
    const { key: bare } = await t.addKey({ permissions: [] });
    const res = await request(t.app).get('/v1/acquirer/api_keys/permissions').set('Authorization', `Bearer ${bare}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.text).toBe(t.policy.catalogueBody.toString());
    expect(res.body.permissions).toContainEqual({ name: 'eod_list', description: 'List and download End-of-Day statements' });
  });

  it('reaches an upstream named by an IPv6 literal, with its Host and the path unchanged', async () => {
    const seen: { url?: string; host?: string; acquirer?: string | string[] } = {};
    const upstream = http.createServer((req, res) => {
      Object.assign(seen, { url: req.url, host: req.headers.host, acquirer: req.headers['x-acquirer-id'] });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"eod_statements":[]}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '::1', resolve));
    const port = (upstream.address() as AddressInfo).port;
    const v6 = await createTestApp({ upstreamUrl: `http://[::1]:${port}` });
    try {
      const { key: v6key } = await v6.addKey({ acquirer_id: 'acq_6' });
      const res = await request(v6.app).get(`${LIST}?page=2`).set('Authorization', `Bearer ${v6key}`);
      expect(res.status).toBe(200);
      expect(res.text).toBe('{"eod_statements":[]}');
      expect(seen).toEqual({ url: `${LIST}?page=2`, host: `[::1]:${port}`, acquirer: 'acq_6' });
    } finally {
      v6.close();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

describe('memory', () => {
  it('a finished exchange is not kept alive by the pooled upstream connection it opened', async () => {
    // The agent keeps the options of the request that opened a connection for as long as the
    // connection lives: nothing of the exchange may hang on them.
    // A collector of our own, from a context made while the flag is on; off again at once, or every
    // context made after it (the next test file's, in this jest worker) would have a global gc.
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    setFlagsFromString('--no-expose-gc');
    const upstream = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"eod_statements":[]}'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const app = await createTestApp({ upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
    const responses: WeakRef<object>[] = [];
    const server = http.createServer((req, res) => {
      responses.push(new WeakRef(res));
      app.app(req, res);
    });
    try {
      const { key: own } = await app.addKey({ acquirer_id: 'acq_mem' });
      for (let i = 0; i < 3; i++) {
        const res = await request(server).get(LIST).set('Authorization', `Bearer ${own}`);
        expect(res.status).toBe(200);
      }
      // Every client connection is closed (supertest's own); the upstream connection stays pooled.
      await waitFor(async () => {
        collect();
        await new Promise((resolve) => setImmediate(resolve));
        return responses.every((r) => r.deref() === undefined);
      }, { what: 'every finished response to be collected', timeoutMs: 3000 });
    } finally {
      app.close();
      server.close();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

describe('upstream answers', () => {
  const notFoundBody = '{"message":"Not found"}';

  it.each([
    [403, 404, notFoundBody],
    [404, 404, notFoundBody],
    // The client's key never goes upstream: an upstream 401 is about the gateway's standing there.
    [401, 502, '{"message":"Bad gateway"}'],
    [500, 500, '{"message":"Internal server error"}'],
    [503, 503, '{"message":"Service unavailable"}'],
    // Refusals of headers the gateway forwards (Accept, If-Match, Range) keep their status.
    [406, 406, '{"message":"Not acceptable"}'],
    [412, 412, '{"message":"Precondition failed"}'],
    [416, 416, '{"message":"Range not satisfiable"}'],
    [418, 502, '{"message":"Bad gateway"}'],
    [429, 502, '{"message":"Bad gateway"}'],
  ])('an upstream %i becomes %i with the documented body and no upstream header', async (upstream, status, body) => {
    nock(UPSTREAM).get(CSV).reply(upstream, '<html>stack trace of acq_2</html>', { 'content-type': 'text/html', 'x-owner': 'acq_2' });
    const res = await get(CSV);
    expect(res.status).toBe(status);
    expect(res.text).toBe(body);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.headers['x-owner']).toBeUndefined();
  });

  it("a 416 keeps the upstream's Content-Range when it is one of an unsatisfied range, and nothing else", async () => {
    nock(UPSTREAM)
      .get(CSV)
      .reply(416, 'no such range', { 'content-range': 'bytes */1048576', 'x-owner': 'acq_1' })
      .get(CSV)
      .reply(416, 'no such range', { 'content-range': `bytes */1048576, http://${new URL(UPSTREAM).host}/` });
    const kept = await get(CSV).set('Range', 'bytes=2000000-');
    expect(kept.status).toBe(416);
    expect(kept.text).toBe('{"message":"Range not satisfiable"}');
    expect(kept.headers['content-range']).toBe('bytes */1048576');
    expect(kept.headers['x-owner']).toBeUndefined();
    const odd = await get(CSV).set('Range', 'bytes=2000000-');
    expect(odd.status).toBe(416);
    expect(odd.headers['content-range']).toBeUndefined();
    // Every other error answer has the same set of headers, 416 or not.
    const names = (h: Record<string, string>) => Object.keys(h).filter((n) => n !== 'date').sort();
    nock(UPSTREAM).get(CSV).reply(412, '', { 'content-range': 'bytes */1048576' });
    const precondition = await get(CSV).set('If-Match', '"x"');
    expect(names(precondition.headers)).toEqual(names(odd.headers));
  });

  it('a success names no software behind the gateway, and a redirect to the upstream itself becomes relative', async () => {
    // As Rails' redirect_to writes one, from the Host it was sent: the upstream's origin in the body too.
    const next = `${UPSTREAM}${LIST}?page=2`;
    nock(UPSTREAM)
      .get(LIST)
      .reply(302, `<html><body>You are being <a href="${next}">redirected</a>.</body></html>`, {
        server: 'legacy-statements/1.4 (Debian)',
        'x-powered-by': 'PHP/5.3.3',
        location: next,
        refresh: `0; url=${next}`,
        link: `<${next}>; rel="next"`,
        'x-backend': new URL(UPSTREAM).host,
        'content-type': 'text/html; charset=utf-8',
      })
      .get(CSV)
      .reply(302, '', { location: 'https://storage.example/eod/abc.csv?sig=1' });
    const redirect = await get(LIST);
    expect(redirect.status).toBe(302);
    expect(redirect.headers.location).toBe(`${LIST}?page=2`);
    expect(redirect.headers.refresh).toBe(`0; url=${LIST}?page=2`);
    expect(redirect.headers.link).toBe(`<${LIST}?page=2>; rel="next"`);
    expect(redirect.headers['content-length']).toBe('0');
    expect(redirect.headers['content-type']).toBeUndefined();
    expect(redirect.text).toBe('');
    expect(JSON.stringify(redirect.headers)).not.toContain(new URL(UPSTREAM).host);
    expect(redirect.headers.server).toBeUndefined();
    expect(redirect.headers['x-powered-by']).toBeUndefined();
    expect(redirect.headers['x-backend']).toBeUndefined();
    // Elsewhere (a storage URL): passed as it is.
    expect((await get(CSV)).headers.location).toBe('https://storage.example/eod/abc.csv?sig=1');
  });

  it('another acquirer\'s statement looks exactly like a missing one and an unknown route', async () => {
    nock(UPSTREAM).get(CSV).reply(403, 'forbidden', { 'x-a': '1' });
    nock(UPSTREAM).get(CSV).reply(404, 'nope', { 'x-b': '2' });
    const forbidden = await get(CSV);
    const missing = await get(CSV);
    const unknownRoute = await get('/v1/acquirer/unknown_things');
    for (const res of [forbidden, missing, unknownRoute]) {
      expect(res.status).toBe(404);
      expect(res.text).toBe(notFoundBody);
    }
    const names = (h: Record<string, string>) => Object.keys(h).filter((n) => n !== 'date').sort();
    expect(names(forbidden.headers)).toEqual(names(unknownRoute.headers));
    expect(names(missing.headers)).toEqual(names(unknownRoute.headers));
  });
  // Refused, silent and resetting upstreams are tested against real sockets in
  // test/integration/upstream-faults.test.ts: nock's interceptors do not fail a piped proxy request.
});

describe("an acquirer's share of the upstream", () => {
  it('is given back however an exchange ends: answered, failed, mapped', async () => {
    t.close();
    t = await createTestApp({ upstreamUrl: UPSTREAM, upstreamTimeoutMs: 200, acquirerMaxInFlight: 1 });
    ({ key } = await t.addKey({ acquirer_id: 'acq_1' }));
    // Each its own page, so that no answer can be taken for another's.
    nock(UPSTREAM).get(LIST).query({ page: '1' }).reply(200, '{}', { 'content-type': JSON_TYPE });
    nock(UPSTREAM).get(LIST).query({ page: '2' }).replyWithError({ code: 'ECONNREFUSED' });
    nock(UPSTREAM).get(LIST).query({ page: '3' }).reply(500, 'broken');
    nock(UPSTREAM).get(CSV).reply(403, 'not yours');
    nock(UPSTREAM).get(LIST).query({ page: '4' }).reply(200, '{}', { 'content-type': JSON_TYPE });
    const statuses = [];
    for (const path of [`${LIST}?page=1`, `${LIST}?page=2`, `${LIST}?page=3`, CSV, `${LIST}?page=4`]) statuses.push((await get(path)).status);
    // One at a time, each after the last ended: with a share of one, a share not given back is a 429.
    expect(statuses).not.toContain(429);
    expect(statuses.some((status) => status >= 500)).toBe(true); // the failed exchange failed
    expect([statuses[3], statuses[4]]).toEqual([404, 200]);
  });
});

describe("an acquirer's share, when its client leaves while the key is looked up", () => {
  it('is never taken, so later requests are not refused', async () => {
    t.close();
    t = await createTestApp({ upstreamUrl: UPSTREAM, upstreamTimeoutMs: 200, acquirerMaxInFlight: 1 });
    ({ key } = await t.addKey({ acquirer_id: 'acq_1' }));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let lookups = 0;
    const findByHash = t.store.findByHash.bind(t.store);
    t.store.findByHash = async (hash: string) => {
      lookups++;
      await gate;
      return findByHash(hash);
    };
    const server = http.createServer(t.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const leaving = http.get({ host: '127.0.0.1', port, path: LIST, agent: false, headers: { authorization: `Bearer ${key}` } });
      leaving.on('error', () => {});
      await waitFor(() => lookups === 1, { what: 'the key lookup' });
      leaving.destroy();
      await waitFor(() => new Promise<true | undefined>((resolve) => server.getConnections((_, count) => resolve(count === 0 ? true : undefined))), { what: 'the client to be gone' });
      // The lookup ends and the request goes on through the steps in microtasks: before the next
      // request's first byte can arrive.
      release();
      nock(UPSTREAM).get(LIST).reply(200, '{}', { 'content-type': JSON_TYPE });
      expect((await get(LIST)).status).toBe(200);
    } finally {
      server.close();
    }
  });
});

describe('refusals never reach the upstream', () => {
  // A catch-all interceptor that must stay pending: any request to the upstream would consume it.
  beforeEach(() => {
    nock(UPSTREAM).get(/.*/).reply(200, 'reached');
  });
  afterEach(() => {
    expect(nock.pendingMocks()).toHaveLength(1);
    nock.cleanAll();
  });

  it.each([
    ['no key', () => request(t.app).get(LIST), 401, '{"message":"Invalid authentication information"}'],
    ['unknown key', () => request(t.app).get(LIST).set('Authorization', `Bearer acquirer_key_${'Z'.repeat(43)}`), 401, '{"message":"Invalid authentication information"}'],
    ['unknown route', () => get('/v1/acquirer/unknown_things'), 404, '{"message":"Not found"}'],
    ['non-canonical path', () => get('/v1/acquirer//eod_statements'), 404, '{"message":"Not found"}'],
    ['a body on a GET route', () => get(LIST).set('Content-Type', 'text/plain').send('hello'), 400, '{"message":"Bad request"}'],
  ])('%s', async (_name, send, status, body) => {
    const res = await send();
    expect(res.status).toBe(status);
    expect(res.text).toBe(body);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    // RFC 9110 requires a 401 to name its scheme; nothing says which of the 401s it was.
    expect(res.headers['www-authenticate']).toBe(status === 401 ? 'Bearer' : undefined);
  });

  it('a key without the permission gets 403', async () => {
    const { key: listOnly } = await t.addKey({ permissions: ['eod_list'] });
    const res = await request(t.app).get(LIST).set('Authorization', `Bearer ${listOnly}`);
    expect(res.status).toBe(403);
    expect(res.text).toBe('{"message":"Unauthorized"}');
  });

  // The API document: calling an endpoint without the required permission gives 403. What else is
  // wrong with the call (a query the route does not take, a body) is judged only for a key that may call it.
  it.each([
    ['a query the route does not take', (k: string) => request(t.app).get(`${LIST}?acquirer_id=acq_2`).set('Authorization', `Bearer ${k}`)],
    ['a body', (k: string) => request(t.app).get(LIST).set('Authorization', `Bearer ${k}`).set('Content-Type', 'text/plain').send('hello')],
  ])('%s, from a key without the permission: 403, and 400 from one with it', async (_name, send) => {
    const { key: listOnly } = await t.addKey({ permissions: ['eod_list'] });
    const denied = await send(listOnly);
    expect(denied.status).toBe(403);
    expect(denied.text).toBe('{"message":"Unauthorized"}');
    const refused = await send(key);
    expect(refused.status).toBe(400);
    expect(refused.text).toBe('{"message":"Bad request"}');
  });
});

describe('the request id', () => {
  it('goes out with every kind of answer: proxied, served, refused, unknown, mapped', async () => {
    nock(UPSTREAM).get(LIST).reply(200, '{}', { 'content-type': 'application/json', 'x-request-id': 'upstream-own' });
    nock(UPSTREAM).get(CSV).reply(403, 'not yours');
    const withId = (path: string, id: string, auth = true) => {
      const r = request(t.app).get(path).set('x-request-id', id);
      return auth ? r.set('Authorization', `Bearer ${key}`) : r;
    };
    const answers = [
      await withId(LIST, 'id-proxied'),
      await withId('/v1/acquirer/api_keys/permissions', 'id-served'),
      await withId(LIST, 'id-refused', false),
      await withId('/v1/nothing/here', 'id-unknown'),
      await withId(CSV, 'id-mapped'),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 200, 401, 404, 404]);
    // The gateway's own each time, never the client's nor the upstream's.
    const ids = answers.map((r) => String(r.headers['x-request-id']));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('is the one that goes upstream, whatever the client sent (a key included, which neither goes upstream nor comes back)', async () => {
    const seen: string[] = [];
    nock(UPSTREAM)
      .get(LIST)
      .times(3)
      .matchHeader('x-request-id', (id: string | null) => seen.push(id ?? '') > 0)
      .reply(200, '{}');
    // The whole key, its prefix in another case, and its random part alone.
    for (const id of [key, `ACQUIRER_KEY_${key.slice('acquirer_key_'.length)}`, key.slice('acquirer_key_'.length)]) {
      const res = await request(t.app).get(LIST).set('Authorization', `Bearer ${key}`).set('x-request-id', id);
      expect(res.status).toBe(200);
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(seen.at(-1)).toBe(res.headers['x-request-id']);
    }
    expect(seen).toHaveLength(3);
  });
});
