import http from 'node:http';
import net from 'node:net';
import { createKey, startServe, type ServeProcess } from '../helpers/cli.js';
import { queryUncheckedPolicyFile } from '../helpers/policy.js';
import { bearer, request } from '../helpers/http.js';
import { openRaw } from '../helpers/raw.js';
import { freePort, startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';

/**
 * An upstream that misbehaves on cue, over raw TCP: the query string (passed through unchanged)
 * says how. The gateway must answer 502/504 with the documented body, or cut a response whose body
 * had started, and never hang.
 */
const LIST = '/v1/acquirer/eod_statements';
const UPSTREAM_TIMEOUT_MS = 400;

let redis: TestRedis;
let faulty: net.Server;
let faultyPort: number;
let gateway: ServeProcess;
let closedGateway: ServeProcess;
let onePoolGateway: ServeProcess;
let key: string;
const upstreamClosed: string[] = [];
/** Every request head the upstream received, raw. */
const heads: string[] = [];
/** What the upstream saw, in order: `head <mode>` as each request arrived, `end trickle` as that answer ended. */
const upstreamEvents: string[] = [];
/** Connections whose `keep-alive-pair` request waits for the other one. */
const pairWaiting: net.Socket[] = [];
/** Connections whose `answer-twice` request was answered once: the test sends the second answer. */
const answeredOnce: net.Socket[] = [];

/** The length of the `big` answer: more than the gateway's socket buffers hold, so some waits in the kernel's. */
const BIG_BYTES = 2_000_000;

/** What the bad-header upstream sends as its body: nothing of it may reach a log. */
const STATEMENT_ROWS = 'merchant_id,card_pan,amount\r\nm-17,4111111111111111,12.00\r\n';

function faultyUpstream(): net.Server {
  return net.createServer((socket) => {
    socket.on('error', () => {});
    let head = '';
    /** Answered a `keep-alive` request and left open: the next request on it finds it closed. */
    let keptAlive = false;
    socket.on('data', (chunk: Buffer) => {
      if (keptAlive) {
        // An upstream closing an idle connection just as the client reuses it, or, for `partial-again`,
        // failing once the first bytes of an answer are out.
        const reusedHead = chunk.toString('latin1');
        heads.push(reusedHead);
        if (reusedHead.includes('?mode=partial-again ')) socket.write('HTTP/1.1 200 OK\r\nConte');
        return void socket.destroy();
      }
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      heads.push(head);
      const mode = /\?mode=([a-z0-9-]+)/.exec(head)?.[1];
      upstreamEvents.push(`head ${mode}`);
      switch (mode) {
        case 'silent':
          socket.on('close', () => upstreamClosed.push('silent'));
          return; // never answer
        case 'endless-404':
          // An error body that never ends; the gateway answers 404 at once but must not keep the socket.
          socket.write('HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nnope.\r\n');
          return;
        case 'huge-headers':
          return void socket.end(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(20_000)}\r\nContent-Length: 2\r\n\r\n{}`);
        case 'status-099':
          return void socket.end('HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n');
        case 'reset':
        case 'reset-again':
          return void socket.destroy();
        case 'keep-alive':
          keptAlive = true;
          return void socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
        case 'answer-twice':
          keptAlive = true;
          answeredOnce.push(socket);
          return void socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
        case 'keep-alive-pair':
          // Answered once two are in, so that the client holds two connections open at once.
          keptAlive = true;
          pairWaiting.push(socket);
          if (pairWaiting.length === 2) {
            for (const waiting of pairWaiting.splice(0)) waiting.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
          }
          return;
        case 'bad-header-with-body':
          // A header Node will not take, in front of statement rows: the parser's error holds the bytes it read.
          return void socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nX-Bad: a\x01b\r\nContent-Length: ${STATEMENT_ROWS.length}\r\n\r\n${STATEMENT_ROWS}`);
        case 'gzip-chunked':
          // gzip as a transfer coding: Node undoes the chunks only, and would pass the gzip bytes on as text/csv.
          return void socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4\r\n\x1f\x8b\x08\x00\r\n0\r\n\r\n');
        case 'big':
          return void socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: ${BIG_BYTES}\r\n\r\n${'x'.repeat(BIG_BYTES)}`);
        case 'reset-unframed':
          // A body framed by the connection alone, then a reset mid-way: not its end, though Node's parser ends the body there.
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nConnection: close\r\n\r\nhello');
          return void setImmediate(() => socket.resetAndDestroy());
        case 'cut-chunked':
          // Chunks, then the connection dropped mid-body.
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
          return void setImmediate(() => socket.destroy());
        case 'garbage':
          return void socket.end('this is not HTTP\r\n\r\n');
        // Short header lines, under the 16 KiB head limit: Node's client keeps the first 2000 only.
        case 'header-lines-2000':
          return void socket.end(`HTTP/1.1 200 OK\r\n${'a:b\r\n'.repeat(1998)}Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
        case 'header-lines-2001':
          // The 2001st says how the body is coded: dropped, the client would take gzip bytes for CSV.
          return void socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: 4\r\n${'a:b\r\n'.repeat(1998)}Content-Encoding: gzip\r\n\r\n\x1f\x8b\x08\x00`);
        // Headers, then a failure before the first byte of the body: nothing of the answer has gone out.
        case 'head-then-close':
          return void socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: 10\r\n\r\n');
        case 'head-then-reset':
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: 10\r\n\r\n');
          return void setImmediate(() => socket.resetAndDestroy());
        case 'head-then-bad-chunk':
          return void socket.end('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
        case 'head-then-silence':
          socket.on('close', () => upstreamClosed.push(mode));
          return void socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: 10\r\n\r\n');
        case 'switching-101':
          // Switching protocols to a plain GET that asked for no upgrade: not an HTTP answer to it.
          return void socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
        case 'no-content-with-body':
          // A 204 has no body (RFC 9110 §15.3.5): the bytes after its head are not part of the answer.
          socket.on('close', () => upstreamClosed.push(mode));
          return void socket.write('HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello');
        case 'trailing-bytes':
          socket.on('close', () => upstreamClosed.push(mode));
          return void socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}junk after the answer');
        case 'truncated':
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nContent-Length: 1000\r\n\r\n' + 'x'.repeat(100));
          return void setImmediate(() => socket.destroy());
        case 'endless-200': {
          // As fast as the connection takes it, for ever: only backpressure slows it.
          socket.on('close', () => upstreamClosed.push('endless-200'));
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n');
          const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`;
          const pump = () => {
            while (!socket.destroyed && socket.write(chunk));
          };
          socket.on('drain', pump);
          return void pump();
        }
        case 'trickle': {
          // Progress, slowly: a chunk every 100 ms for 1.5 s, longer than the gateway's ticks.
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n');
          let sent = 0;
          const timer = setInterval(() => {
            if (++sent <= 15) return void socket.write('2\r\nt\n\r\n');
            clearInterval(timer);
            upstreamEvents.push('end trickle');
            socket.end('0\r\n\r\n');
          }, 100);
          return void socket.on('close', () => clearInterval(timer));
        }
        case 'slow-stream':
          socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
          socket.on('close', () => upstreamClosed.push('slow-stream'));
          return; // keeps the body open until the client goes away
        default:
          return void socket.end('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
      }
    });
  });
}

beforeAll(async () => {
  redis = await startTestRedis();
  faulty = faultyUpstream();
  await new Promise<void>((resolve) => faulty.listen(0, '127.0.0.1', () => resolve()));
  faultyPort = (faulty.address() as net.AddressInfo).port;
  // The fake upstream is told what to do through the query (`?mode=reset`): a list route that takes any.
  const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, POLICY_FILE: queryUncheckedPolicyFile() };
  ({ key } = await createKey(env, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] }));
  gateway = await startServe({ ...env, UPSTREAM_URL: `http://127.0.0.1:${faultyPort}`, UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS), STREAM_IDLE_TIMEOUT_MS: '1000' });
  onePoolGateway = await startServe({ ...env, UPSTREAM_URL: `http://127.0.0.1:${faultyPort}`, UPSTREAM_MAX_SOCKETS: '1', ACQUIRER_MAX_IN_FLIGHT: '1', UPSTREAM_TIMEOUT_MS: '5000', STREAM_IDLE_TIMEOUT_MS: '1000' });
  // A port nothing listens on: connection refused.
  closedGateway = await startServe({ ...env, UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
}, 30_000);

afterAll(() =>
  stopAll(
    () => Promise.all([gateway?.stop(), closedGateway?.stop(), onePoolGateway?.stop()]),
    () => faulty !== undefined && new Promise((resolve) => faulty.close(resolve)),
    () => redis?.stop(),
  ),
);

const JSON_TYPE = 'application/json; charset=utf-8';

it('works when the upstream behaves (the fixture is sound)', async () => {
  const res = await request(gateway.url, LIST, bearer(key));
  expect(res.status).toBe(200);
  expect(res.body.toString()).toBe('{}');
});

it.each([
  ['refused', () => request(closedGateway.url, LIST, bearer(key)), 502, '{"message":"Bad gateway"}'],
  ['reset before answering', () => request(gateway.url, `${LIST}?mode=reset`, bearer(key)), 502, '{"message":"Bad gateway"}'],
  ['answering garbage', () => request(gateway.url, `${LIST}?mode=garbage`, bearer(key)), 502, '{"message":"Bad gateway"}'],
  ['silent past UPSTREAM_TIMEOUT_MS', () => request(gateway.url, `${LIST}?mode=silent`, bearer(key)), 504, '{"message":"Gateway timeout"}'],
  ['sending oversized response headers', () => request(gateway.url, `${LIST}?mode=huge-headers`, bearer(key)), 502, '{"message":"Bad gateway"}'],
  ['answering with status 099', () => request(gateway.url, `${LIST}?mode=status-099`, bearer(key)), 502, '{"message":"Bad gateway"}'],
  ['switching protocols (101) on a request that asked for no upgrade', () => request(gateway.url, `${LIST}?mode=switching-101`, bearer(key)), 502, '{"message":"Bad gateway"}'],
])('an upstream %s: the documented status and body', async (_name, send, status, body) => {
  const res = await send();
  expect(res.status).toBe(status);
  expect(res.body.toString()).toBe(body);
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
});

it.each([
  ['closes its connection', 'head-then-close', 502, '{"message":"Bad gateway"}', 'upstream_unreachable', 'reset'],
  ['resets its connection', 'head-then-reset', 502, '{"message":"Bad gateway"}', 'upstream_unreachable', 'reset'],
  ['sends a chunk size Node\'s parser refuses', 'head-then-bad-chunk', 502, '{"message":"Bad gateway"}', 'upstream_unreachable', 'protocol'],
  ['sends nothing more for STREAM_IDLE_TIMEOUT_MS', 'head-then-silence', 504, '{"message":"Gateway timeout"}', 'upstream_timeout', 'stalled'],
])('an upstream that sends its headers and then %s, before any of its body: the whole documented answer, logged and counted as it was sent', async (_name, mode, status, body, decision, kind) => {
  const res = await request(gateway.url, `${LIST}?mode=${mode}`, bearer(key));
  expect(res.status).toBe(status);
  expect(res.body.toString()).toBe(body);
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  const requestId = res.headers['x-request-id'] as string;
  const entries = () => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const line = await waitFor(() => entries().find((e) => e.event === 'request' && e.request_id === requestId), { what: 'the access line' });
  // (httpxy then closes the connection, so the answer may not be seen to finish: `completed` is not asked.)
  expect(line).toMatchObject({ status, decision, code: decision.toUpperCase() });
  const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
  expect(metrics).toMatch(new RegExp(`^acquirer_gateway_upstream_errors_total\\{kind="${kind}"\\} [1-9]`, 'm'));
  expect(metrics).toMatch(new RegExp(`^acquirer_gateway_requests_total\\{route="eod_statements_list",method="GET",status="${status}"\\} [1-9]`, 'm'));
});

it.each([
  ['a 204 with a body', 'no-content-with-body', 204, ''],
  ['a complete answer followed by stray bytes', 'trailing-bytes', 200, '{}'],
])('%s: the client gets the answer, and the connection that carried the stray bytes is not reused', async (_name, mode, status, body) => {
  const res = await request(gateway.url, `${LIST}?mode=${mode}`, bearer(key));
  expect(res.status).toBe(status);
  expect(res.body.toString()).toBe(body);
  expect(res.headers['content-length']).toBe(status === 204 ? undefined : String(body.length));
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  // The upstream left its end open: the gateway closed the connection rather than pool it.
  await waitFor(() => upstreamClosed.includes(mode));
  const line = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'upstream_bytes_after_answer' && e.request_id === res.headers['x-request-id']));
  expect(line.level).toBe(40);
  expect(line.code).toMatch(/^HPE_/); // a parser error: counted as kind="protocol"
});

it('an answer Node\'s parser refuses is a 502, and the bytes it read are not logged', async () => {
  const res = await request(gateway.url, `${LIST}?mode=bad-header-with-body`, bearer(key));
  expect(res.status).toBe(502);
  expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
  const line = await waitFor(
    () => gateway.logLines.find((l) => l.includes('"event":"upstream_request_failed"') && l.includes(res.headers['x-request-id'] as string)),
    { what: 'the failure\'s log line, with the request id' },
  );
  expect(line).not.toContain('4111');
  expect(line).not.toContain('"0":72');
  expect(line.length).toBeLessThan(4096);
  expect(JSON.parse(line).err.rawPacket).toMatch(/^\[\d+ bytes\]$/);
});

it('an answer of more than 2000 header lines is a 502: what Node would drop from them unseen (a content coding) cannot slip past', async () => {
  const whole = await request(gateway.url, `${LIST}?mode=header-lines-2000`, bearer(key));
  expect(whole.status).toBe(200);
  expect(whole.body.toString()).toBe('{}');
  const res = await request(gateway.url, `${LIST}?mode=header-lines-2001`, bearer(key));
  expect(res.status).toBe(502);
  expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  const line = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'upstream_request_failed' && e.request_id === res.headers['x-request-id']), { what: 'the log line' });
  expect(line.err.code).toBe('ERR_UPSTREAM_HEADER_LINES');
});

it('a transfer coding other than chunked is a 502, never coded bytes under the upstream\'s content type', async () => {
  const res = await request(gateway.url, `${LIST}?mode=gzip-chunked`, bearer(key));
  expect(res.status).toBe(502);
  expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  const line = await waitFor(() => gateway.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'upstream_request_failed' && e.err?.code === 'ERR_UPSTREAM_TRANSFER_CODING'), { what: 'the log line' });
  expect(line.err.codings).toBe('gzip, chunked');
  const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
  expect(metrics).toMatch(/^acquirer_gateway_upstream_errors_total\{kind="protocol"\} [1-9]/m);
});

it('a timed-out upstream request is cancelled, so a silent upstream cannot exhaust the pool', async () => {
  upstreamClosed.length = 0;
  // Expect: 100-continue once kept httpxy from reporting the upstream request, so it was never cancelled.
  const res = await request(gateway.url, `${LIST}?mode=silent`, { ...bearer(key), expect: '100-continue' });
  expect(res.status).toBe(504);
  await waitFor(() => upstreamClosed.includes('silent'), { timeoutMs: 2000, what: 'the upstream socket to be closed' });
  expect(heads.at(-1)!.toLowerCase()).not.toContain('expect:');
});

it('an upstream error body that never ends does not hold a pooled connection', async () => {
  for (let i = 0; i < 2; i++) {
    const res = await request(onePoolGateway.url, `${LIST}?mode=endless-404`, bearer(key));
    expect(res.status).toBe(404);
    expect(res.body.toString()).toBe('{"message":"Not found"}');
  }
  // One socket in the pool: this waits for it to be freed, which must happen well before 5 s.
  const res = await request(onePoolGateway.url, LIST, bearer(key));
  expect(res.status).toBe(200);
});

it('a body cut by the upstream reaches the client as a truncated response, not a complete one', async () => {
  const outcome = await new Promise<{ status: number; received: number; complete: boolean }>((resolve) => {
    http.get({ host: '127.0.0.1', port: gateway.port, path: `${LIST}?mode=truncated`, agent: false, headers: bearer(key) }, (res) => {
      let received = 0;
      res.on('data', (c: Buffer) => (received += c.length));
      res.on('error', () => {});
      res.on('close', () => resolve({ status: res.statusCode!, received, complete: res.complete }));
    }).on('error', () => {}); // the cut is a reset
  });
  expect(outcome).toEqual({ status: 200, received: 100, complete: false });
  // Logged and counted as what it was: cut, not allowed-and-done.
  const line = await waitFor(
    () => gateway.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'request' && String(e.path).includes('mode=truncated')),
    { what: 'the access line' },
  );
  expect(line).toMatchObject({ level: 40, status: 200, decision: 'aborted', completed: false, client: '127.0.0.1' });
  const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
  expect(metrics).toMatch(/^acquirer_gateway_upstream_errors_total\{kind="reset"\} [1-9]/m);
});

it('a client that goes away cancels its upstream request', async () => {
  await new Promise<void>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: gateway.port, path: `${LIST}?mode=slow-stream`, agent: false, headers: bearer(key) }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
  });
  await waitFor(() => upstreamClosed.includes('slow-stream'), { timeoutMs: 2000, what: 'the upstream connection to close' });
});

describe('a streaming answer on which nothing moves for STREAM_IDLE_TIMEOUT_MS', () => {
  it('an upstream that stops sending mid-body: the client sees a truncated answer, the upstream connection is closed', async () => {
    upstreamClosed.length = 0;
    const stalls = async () => Number(/^acquirer_gateway_upstream_errors_total\{kind="stalled"\} (\d+)$/m.exec((await request(gateway.adminUrl, '/metrics')).body.toString())?.[1] ?? 0);
    const stallsBefore = await stalls();
    const outcome = await new Promise<{ status: number; body: string; complete: boolean }>((resolve) => {
      http.get({ host: '127.0.0.1', port: gateway.port, path: `${LIST}?mode=slow-stream&stall=upstream`, agent: false, headers: bearer(key) }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('error', () => {});
        res.on('close', () => resolve({ status: res.statusCode!, body, complete: res.complete }));
      }).on('error', () => {}); // the cut is a reset
    });
    expect(outcome).toEqual({ status: 200, body: 'hello', complete: false });
    await waitFor(() => upstreamClosed.includes('slow-stream'), { timeoutMs: 2000, what: 'the upstream connection to close' });
    const entries = () => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const line = await waitFor(() => entries().find((e) => e.event === 'request' && String(e.path).includes('stall=upstream')), { what: 'the access line' });
    expect(line).toMatchObject({ level: 40, status: 200, decision: 'aborted', completed: false });
    expect(entries().find((e) => e.event === 'upstream_stalled' && e.request_id === line.request_id)).toMatchObject({ stalled: 'upstream', idle_ms: 1000 });
    expect(await stalls()).toBe(stallsBefore + 1);
  });

  it('a client that stops reading loses its connection, and the pooled upstream connection it held is freed', async () => {
    upstreamClosed.length = 0;
    // Reads the response head, then nothing: the upstream's endless body fills the buffers and stops.
    const client = net.connect(onePoolGateway.port, '127.0.0.1');
    client.on('error', () => {});
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    client.write(`GET ${LIST}?mode=endless-200 HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await new Promise<void>((resolve) => client.once('data', () => resolve()));
    client.pause();
    const entries = () => onePoolGateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    await waitFor(() => entries().find((e) => e.event === 'upstream_stalled' && e.stalled === 'client'), { timeoutMs: 5000, what: 'the stall line' });
    await waitFor(() => upstreamClosed.includes('endless-200'), { timeoutMs: 2000, what: 'the upstream connection to close' });
    // A paused socket notices nothing: reading again, the client finds its connection cut.
    client.resume();
    await closed;
    // UPSTREAM_MAX_SOCKETS=1: served only because the stalled client's connection was given up.
    const res = await request(onePoolGateway.url, LIST, bearer(key));
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('{}');
  });

  it('a pipelined request is sent upstream once the answer before it is done, and then watched', async () => {
    upstreamClosed.length = 0;
    upstreamEvents.length = 0;
    // One connection, two requests: the first answer takes 1.5 s, longer than a tick (400 ms), while
    // the second waits for it; then the second's upstream stops sending after 5 bytes.
    const client = net.connect(gateway.port, '127.0.0.1');
    client.on('error', () => {});
    let received = '';
    client.on('data', (d: Buffer) => (received += d.toString('latin1')));
    let closed = false;
    client.once('close', () => (closed = true));
    const head = (query: string) => `GET ${LIST}?${query} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    client.write(head('mode=trickle') + head('mode=slow-stream&stall=pipelined'));
    // 1.5 s for the first answer, then 1 to 1.4 s of quiet: the gateway cuts the connection. Unwatched,
    // it stayed open for as long as the client kept it.
    await waitFor(() => closed, { timeoutMs: 6000, what: 'the gateway to cut the connection' });
    const answers = received.split(/(?=HTTP\/1\.1 )/);
    expect(answers).toHaveLength(2);
    expect(answers[0]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answers[0]!.endsWith('\r\n\r\n' + '2\r\nt\n\r\n'.repeat(15) + '0\r\n\r\n')).toBe(true);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answers[1]!.endsWith('\r\n\r\n5\r\nhello\r\n')).toBe(true);
    await waitFor(() => upstreamClosed.includes('slow-stream'), { timeoutMs: 2000, what: 'the upstream connection to close' });
    const entries = () => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const line = await waitFor(() => entries().find((e) => e.event === 'request' && String(e.path).includes('stall=pipelined')), { what: 'the access line' });
    expect(line).toMatchObject({ status: 200, decision: 'aborted', completed: false });
    expect(entries().find((e) => e.event === 'upstream_stalled' && e.request_id === line.request_id)).toMatchObject({ stalled: 'upstream' });
    expect(entries().find((e) => e.event === 'request' && String(e.path).includes('mode=trickle'))).toMatchObject({ status: 200, decision: 'allowed', completed: true });
    // Sent upstream one after the other: a connection holds one pooled upstream connection at most.
    expect(upstreamEvents).toEqual(['head trickle', 'end trickle', 'head slow-stream']);
  }, 10_000);
});

it('an upstream that answers one request twice, the second while the connection is idle: the connection is closed, counted and logged, and the next request gets its own answer', async () => {
  const first = await request(gateway.url, `${LIST}?mode=answer-twice`, bearer(key));
  expect(first.status).toBe(200);
  expect(first.body.toString()).toBe('{}');
  // Node closes the connection on these bytes, and said nothing of it; had a request been waiting on
  // the connection, they would have been its answer.
  const upstreamSide = answeredOnce.shift()!;
  const closed = new Promise((resolve) => upstreamSide.once('close', resolve));
  upstreamSide.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"stale":"yes!"}');
  await closed;
  const logged = await waitFor(
    () => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.event === 'upstream_unasked_bytes'),
    { what: 'the unasked bytes to be logged' },
  );
  expect(logged).toMatchObject({ level: 50, connections: 1 });
  expect(logged.bytes).toBeGreaterThan(0);
  const metrics = (await request(gateway.adminUrl, '/metrics')).body.toString();
  expect(metrics).toMatch(/^acquirer_gateway_upstream_unasked_bytes_total 1$/m);
  const next = await request(gateway.url, LIST, bearer(key));
  expect(next.status).toBe(200);
  expect(next.body.toString()).toBe('{}');
});

describe('a pooled connection the upstream closed as it was reused', () => {
  let pooled: ServeProcess;
  beforeAll(async () => {
    pooled = await startServe({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, POLICY_FILE: queryUncheckedPolicyFile(), UPSTREAM_URL: `http://127.0.0.1:${faultyPort}`, UPSTREAM_MAX_SOCKETS: '2', ACQUIRER_MAX_IN_FLIGHT: '2' });
  });
  afterAll(async () => pooled.stop());

  const sentTwice = (mode: string) => heads.filter((h) => h.includes(`?mode=${mode}-again `)).length;
  /** One connection kept in the pool by a first request, then a request the upstream answers in `mode` on it. */
  const onAKeptConnection = async (mode: string) => {
    expect((await request(pooled.url, `${LIST}?mode=keep-alive`, bearer(key))).status).toBe(200);
    return request(pooled.url, `${LIST}?mode=${mode}`, bearer(key));
  };

  it('a GET is sent again on a new connection, and the client never sees the failure', async () => {
    // Sent on the kept connection (the only one in the pool), which the upstream closes; then again on a new one.
    const res = await onAKeptConnection('keep-alive-again');
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('{}');
    expect(sentTwice('keep-alive')).toBe(2);
    // The same request both times: the identity the gateway set, the request id, never the key.
    const [first, second] = heads.filter((h) => h.includes('?mode=keep-alive-again ')).map((h) => h.toLowerCase()) as [string, string];
    expect(second).toBe(first);
    expect(first).toContain('\r\nx-acquirer-id: acq_1\r\n');
    expect(first).toMatch(/\r\nx-request-id: [0-9a-f-]{36}\r\n/);
    expect(first).not.toContain('authorization');
    const warned = await waitFor(
      () => pooled.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'upstream_retried'),
      { what: 'the retry to be logged' },
    );
    expect(warned).toMatchObject({ level: 40, code: 'ECONNRESET', route: 'eod_statements_list' });
    const metrics = (await request(pooled.adminUrl, '/metrics')).body.toString();
    expect(metrics).toMatch(/^acquirer_gateway_upstream_retries_total 1$/m);
    // Recovered, so not an upstream error.
    expect(metrics).not.toMatch(/^acquirer_gateway_upstream_errors_total\{.*\} [1-9]/m);
    expect(metrics).toMatch(/^acquirer_gateway_upstream_errors_total\{kind="reset"\} 0$/m);
  });

  it('only once: when the second attempt fails too, the client gets 502', async () => {
    const res = await onAKeptConnection('reset-again');
    expect(res.status).toBe(502);
    expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
    expect(sentTwice('reset')).toBe(2);
  });

  it('the second attempt takes a new connection, not another idle one the upstream closed too', async () => {
    const pair = await Promise.all([1, 2].map(() => request(pooled.url, `${LIST}?mode=keep-alive-pair`, bearer(key))));
    expect(pair.map((r) => r.status)).toEqual([200, 200]);
    // Two idle connections in the pool, both closed by the upstream when reused.
    const res = await request(pooled.url, `${LIST}?mode=pair-again`, bearer(key));
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('{}');
    expect(sentTwice('pair')).toBe(2);
  });

  it('not once an answer has begun: the upstream may have acted on the request', async () => {
    const res = await onAKeptConnection('partial-again');
    expect(res.status).toBe(502);
    expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
    expect(sentTwice('partial')).toBe(1);
  });

  it('a connection that fails on its first request is not tried again', async () => {
    heads.length = 0;
    const res = await request(pooled.url, `${LIST}?mode=reset`, bearer(key));
    expect(res.status).toBe(502);
    expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
    expect(heads.filter((h) => h.includes('?mode=reset ')).length).toBe(1);
  });
});

it('keeps serving after all of that', async () => {
  expect((await request(gateway.url, LIST, bearer(key))).status).toBe(200);
});

describe('an HTTP/1.0 client, whose answer without a length ends when the connection closes', () => {
  /** What an HTTP/1.0 client saw: the bytes, and whether the connection ended cleanly or was reset. */
  const http10 = async (path: string) => {
    const connection = openRaw(gateway.port);
    connection.socket.write(`GET ${path} HTTP/1.0\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    const ending = await connection.ending;
    return { received: connection.received(), ending };
  };

  it('gets a whole answer as a clean close', async () => {
    const { received, ending } = await http10(`${LIST}?mode=trickle`);
    expect(ending).toBe('end');
    expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(received.endsWith('t\n'.repeat(15))).toBe(true);
  });

  it.each([
    ['cut by the upstream', 'cut-chunked'],
    ['framed by the connection and reset by the upstream', 'reset-unframed'],
    ['stalled upstream, cut by the gateway', 'slow-stream&stall=http10'],
  ])('sees a body %s as a reset, never as a clean end, and the access line says so', async (_name, mode) => {
    const { received, ending } = await http10(`${LIST}?mode=${mode}`);
    expect(ending).toBe('ECONNRESET');
    expect(received).not.toMatch(/^content-length:/im);
    const entries = () => gateway.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const line = await waitFor(() => entries().find((e) => e.event === 'request' && e.path === `${LIST}?mode=${mode}`), { what: 'the access line' });
    expect(line).toMatchObject({ level: 40, status: 200, decision: 'aborted', completed: false });
  });
});

it('a body cut mid-way closes the connection, and an answer already sent on it arrives whole', async () => {
  // Framed by chunks, the cut shows as a missing last chunk; a reset would also throw away what is still
  // on its way: here, most of the complete 2 MB answer before it, waiting while the client reads nothing.
  const { socket, received: receivedText, ending: ended } = openRaw(gateway.port);
  socket.pause();
  const head = (mode: string) => `GET ${LIST}?mode=${mode} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${key}\r\n\r\n`;
  socket.write(head('big') + head('cut-chunked&behind=big'));
  await waitFor(() => gateway.logLines.some((l) => l.includes('"event":"request"') && l.includes('behind=big') && l.includes('"completed":false')), { what: 'the second answer to be cut' });
  socket.resume();
  expect(await ended).toBe('end');
  // Compared in pieces: a failure message holding 2 MB would drown the report.
  const received = receivedText();
  const firstHead = received.slice(0, received.indexOf('\r\n\r\n') + 4);
  expect(firstHead).toMatch(new RegExp(`^HTTP/1\\.1 200 OK\\r\\n[\\s\\S]*content-length: ${BIG_BYTES}\\r\\n`, 'i'));
  const firstBody = received.slice(firstHead.length, firstHead.length + BIG_BYTES);
  expect(firstBody.length).toBe(BIG_BYTES);
  expect(/^x*$/.test(firstBody)).toBe(true);
  const second = received.slice(firstHead.length + BIG_BYTES);
  expect(second.length).toBeLessThan(1000);
  expect(second).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n$/i);
});

it('a request that timed out waiting for a pooled connection gives it back: the connection is kept and reused', async () => {
  // One pooled connection, held by an answer whose body goes on past the deadline of a second request
  // queued behind it (its headers come at once, within its own deadline).
  let connections = 0;
  const seen: string[] = [];
  let release: (() => void) | undefined;
  const upstream = http.createServer((req, res) => {
    seen.push(req.url!);
    res.writeHead(200, { 'content-type': 'application/json' });
    if (!req.url!.includes('hold')) return void res.end('{"eod_statements":[]}');
    res.write('{"eod_statements":');
    release = () => res.end('[]}');
  });
  upstream.on('connection', () => connections++);
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve()));
  const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, POLICY_FILE: queryUncheckedPolicyFile() };
  const g = await startServe({ ...env, UPSTREAM_URL: `http://127.0.0.1:${(upstream.address() as net.AddressInfo).port}`, UPSTREAM_MAX_SOCKETS: '1', ACQUIRER_MAX_IN_FLIGHT: '1', UPSTREAM_TIMEOUT_MS: '600' });
  try {
    // Another acquirer's request waits for the pool: one of the same acquirer would be past its share (429).
    const { key: other } = await createKey(env, { acquirer: 'acq_2', permissions: ['eod_list', 'eod_read'] });
    const held = request(g.url, `${LIST}?hold=1`, bearer(key));
    await waitFor(() => release, { what: 'the upstream to hold the first request' });
    const queued = await request(g.url, `${LIST}?queued=1`, bearer(other));
    expect({ status: queued.status, body: queued.body.toString() }).toEqual({ status: 504, body: '{"message":"Gateway timeout"}' });
    release!();
    expect(await held).toMatchObject({ status: 200, body: Buffer.from('{"eod_statements":[]}') });
    const next = await request(g.url, `${LIST}?next=1`, bearer(key));
    expect(next.status).toBe(200);
    // The queued request never reached the upstream, and the one connection served both of the others.
    expect(seen).toEqual([`${LIST}?hold=1`, `${LIST}?next=1`]);
    expect(connections).toBe(1);
    const metrics = (await request(g.adminUrl, '/metrics')).body.toString();
    expect(metrics).toMatch(/^acquirer_gateway_upstream_errors_total\{kind="pool_exhausted"\} 1$/m);
    expect(metrics).toMatch(/^acquirer_gateway_upstream_errors_total\{kind="timeout"\} 0$/m);
  } finally {
    await g.stop();
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  }
});
