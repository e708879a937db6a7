import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { silentLogger } from '../../../src/observability/logger/logger.js';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { createUpstreamProxy, type UpstreamProxy } from '../../../src/proxy/create-proxy.js';
import { createRequestLocals } from '../../../src/app/request-context.js';
import { shippedPolicy } from '../../helpers/policy.js';
import { stopAll } from '../../helpers/stop-all.js';
import { startUpstream, type RecordingUpstream } from '../../helpers/upstream.js';
import { waitFor } from '../../helpers/wait.js';

/**
 * The proxy step alone, behind a plain HTTP server whose handler stands in for the pipeline: it sets
 * what the earlier steps would have (the policy, the key, the request id) and decides when each
 * request is forwarded, so that several can be forwarded in one turn of the event loop.
 */
type Held = { req: Request; res: Response };

let policy: CompiledPolicy;
let upstream: RecordingUpstream;
let gateway: http.Server;
let proxy: UpstreamProxy;
let onRequest: (held: Held) => void;

beforeAll(async () => {
  policy = await shippedPolicy();
});

async function start({ timeoutMs, idleTimeoutMs, maxSockets = 256 }: { timeoutMs: number; idleTimeoutMs: number; maxSockets?: number }) {
  upstream = await startUpstream();
  proxy = createUpstreamProxy({ target: upstream.url, timeoutMs, idleTimeoutMs, maxSockets, logger: silentLogger });
  gateway = http.createServer((req, res) => {
    const locals = createRequestLocals(policy, `req-${req.url!.slice(1)}`, performance.now());
    locals.key = { id: 'key_test', acquirerId: 'acq_1', permissions: new Set(), allowlist: null };
    (res as unknown as Response).locals = locals;
    onRequest({ req: req as Request, res: res as unknown as Response });
  });
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  return proxy.forward as (req: Request, res: Response, next: NextFunction) => void;
}

afterEach(async () => {
  proxy.close();
  gateway.closeAllConnections();
  await stopAll(
    () => new Promise((resolve) => gateway.close(resolve)),
    () => upstream.close(),
  );
});

/** A GET on a connection of its own: its status and body, or how it failed, and when it ended (performance.now()). */
function get(path: string): Promise<{ status?: number; body?: string; error?: string; sentAt: number; endedAt: number }> {
  const sentAt = performance.now();
  return new Promise((resolve) => {
    http
      .get({ host: '127.0.0.1', port: (gateway.address() as AddressInfo).port, path, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode, body, sentAt, endedAt: performance.now() }));
      })
      .on('error', (err) => resolve({ error: err.message, sentAt, endedAt: performance.now() }));
  });
}

/** Keeps the CPU busy, as the judging of other requests in the same turn would. */
function busyFor(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('the upstream proxy, requests forwarded in the same turn', () => {
  it('sends each once, and never one whose client left while it waited for the end of its turn', async () => {
    const forward = await start({ timeoutMs: 5000, idleTimeoutMs: 5000 });
    const held: Held[] = [];
    const nexts: unknown[] = [];
    onRequest = (h) => {
      held.push(h);
      if (held.length < 2) return;
      // One turn: the first goes at once, the second waits for the turn's end, and its client is gone by then.
      for (const { req, res } of held) forward(req, res, (err?: unknown) => nexts.push(err));
      held[1]!.req.socket.destroy();
    };
    const first = get('/one');
    await waitFor(() => held.length === 1, { what: 'the first request to arrive' });
    const second = await get('/two');
    expect(second.error).toBeDefined();
    expect(await first).toMatchObject({ status: 200, body: JSON.stringify({ upstream: true, url: '/one' }) });
    expect(upstream.received.map((r) => r.url)).toEqual(['/one']);
    expect(upstream.received[0]!.headers['x-acquirer-id']).toBe('acq_1');
    expect(upstream.connections()).toBe(1);
    expect(nexts).toEqual([]);
  });

  it('answers one that waited for the end of a busy turn 504 at its deadline, not a whole timer period later', async () => {
    // A period of 300 ms: the deadline falls on the first tick.
    const forward = await start({ timeoutMs: 300, idleTimeoutMs: 3000 });
    upstream.handle(() => {}); // never answers
    const held: Held[] = [];
    onRequest = (h) => {
      held.push(h);
      if (held.length === 2) {
        // A turn of two: the next turn is a busy one, whose requests all wait for its end.
        for (const { req, res } of held) forward(req, res, () => {});
      } else if (held.length === 3) {
        // Its turn goes on for 20 ms after it is judged, and only then is it sent. Its deadline counts
        // from when it was judged: counted from the send, the timer's tick would find it not yet due,
        // and the next comes a whole period later.
        forward(h.req, h.res, () => {});
        busyFor(20);
      }
    };
    const pair = [get('/a'), get('/b')];
    await waitFor(() => upstream.received.length === 2, { what: 'the pair to reach the upstream' });
    const late = await get('/late');
    expect(late.status).toBe(504);
    expect(late.body).toBe('{"message":"Gateway timeout"}');
    // On time, not a 300 ms period later (about 600 ms).
    expect(late.endedAt - late.sentAt).toBeGreaterThanOrEqual(300);
    expect(late.endedAt - late.sentAt).toBeLessThan(550);
    expect(upstream.received.map((r) => r.url)).toEqual(['/a', '/b', '/late']);
    expect((await Promise.all(pair)).map((r) => r.status)).toEqual([504, 504]);
  });
});

describe('the upstream proxy, what the upstream receives', () => {
  it('sends requests that waited in the pool\'s queue with exactly the forwarded headers, nothing of the gateway\'s own bookkeeping', async () => {
    // One pooled connection: of three requests forwarded together, two wait in the agent's queue.
    const forward = await start({ timeoutMs: 5000, idleTimeoutMs: 5000, maxSockets: 1 });
    const held: Held[] = [];
    onRequest = (h) => {
      held.push(h);
      if (held.length === 3) for (const { req, res } of held) forward(req, res, () => {});
    };
    const answers = await Promise.all(['/q1', '/q2', '/q3'].map((path) => get(path)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(upstream.connections()).toBe(1);
    expect(upstream.received.map((r) => r.url).sort()).toEqual(['/q1', '/q2', '/q3']);
    for (const { rawHeaders } of upstream.received) {
      const names = rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()).sort();
      expect(names).toEqual(['connection', 'host', 'x-acquirer-id', 'x-request-id']);
    }
  });

  it('never sends a request whose client left while it waited in the pool\'s queue, and keeps the pooled connection', async () => {
    const forward = await start({ timeoutMs: 5000, idleTimeoutMs: 5000, maxSockets: 1 });
    let release = () => {};
    upstream.handle((req, res) => {
      const answer = () => res.end(JSON.stringify({ url: req.url }));
      if (req.url === '/held') release = answer;
      else answer();
    });
    const held: Held[] = [];
    onRequest = (h) => {
      held.push(h);
      forward(h.req, h.res, () => {});
    };
    const first = get('/held');
    await waitFor(() => upstream.received.length === 1, { what: 'the first request to take the one connection' });
    const left = get('/left');
    await waitFor(() => held.length === 2, { what: 'the second request to be forwarded' });
    // Queued behind the first: its client goes away before the pool has a connection for it.
    await waitFor(() => Object.values(proxy.agent.requests).flat().length === 1, { what: 'the second request in the queue' });
    held[1]!.req.socket.destroy();
    expect((await left).error).toBeDefined();
    release();
    expect(await first).toMatchObject({ status: 200 });
    expect(await get('/after')).toMatchObject({ status: 200 });
    expect(upstream.received.map((r) => r.url)).toEqual(['/held', '/after']);
    expect(upstream.connections()).toBe(1);
  });
});
