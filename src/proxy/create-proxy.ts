import http, { type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { NextFunction, RequestHandler, Response } from 'express';
import { createProxyMiddleware, type Plugin } from 'http-proxy-middleware';
import type { ErrorCode } from '../errors/codes.js';
import { ERROR_CODES } from '../errors/codes.js';
import { cutResponse, noteBodyEndsWithConnection, sendError } from '../errors/error-response.js';
import type { Logger } from '../observability/logger/logger.js';
import { lineThrottle } from '../observability/line-throttle.js';
import { forwardBody } from './forward-body.js';
import { buildClientHeaders, buildUpstreamHeaders, hasDroppedBody, unsatisfiedRange, upstreamAddress } from './forward-headers.js';
import { classifyUpstreamError, TooManyHeaderLinesError, UnexpectedUpgradeError, UnsupportedTransferCodingError, type UpstreamErrorKind } from '../errors/upstream-errors.js';
import { mapUpstreamStatus } from '../errors/upstream-status.js';
import { createSendTogether } from './send-together.js';
import { createStreamedMemory, type CollectYoung } from './streamed-memory.js';

export interface UpstreamProxyOptions {
  /** Origin of the statements service. */
  readonly target: string;
  /** Time allowed until the upstream's response headers arrive; then 504. */
  readonly timeoutMs: number;
  /** Once the answer streams: nothing passing to the client for this long cuts it (see watchExchange). */
  readonly idleTimeoutMs: number;
  readonly agent: http.Agent;
  readonly logger: Logger;
  /** Frees the dead read buffers of streamed bodies every few MiB (streamed-memory.ts); none: left to V8. */
  readonly collectYoung?: CollectYoung | undefined;
  /** Called once for each request sent a second time (see retriable). */
  readonly onRetry?: () => void;
  /** Called once for each idle pooled connection the upstream sent bytes on (see countUnaskedBytes). */
  readonly onUnaskedBytes?: () => void;
}

/** A keep-alive agent for the upstream: connection reuse is most of a proxy's latency budget. */
export function createUpstreamAgent(target: string, maxSockets: number): http.Agent {
  const options = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo' as const };
  return new URL(target).protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
}

/**
 * On the headers handed to httpxy, which copies them with an object spread (symbols included) into
 * the options Node gives the agent, and never sent (Node sends string names only): the exchange the
 * upstream request belongs to.
 */
const EXCHANGE = Symbol('the exchange an upstream request belongs to');
type AgentWithQueue = http.Agent & { addRequest(req: ClientRequest, options: { headers?: Record<PropertyKey, unknown> }): void };

/**
 * Header lines of an upstream answer, at most: Node's own default. Past it Node drops the rest from
 * the headers it hands over without a word, while its parser still acts on them: a
 * `Transfer-Encoding: gzip, chunked` or `Content-Encoding` there would escape every check on them.
 */
export const MAX_UPSTREAM_HEADER_LINES = 2000;

/**
 * Links each upstream request to its exchange as soon as it is made. httpxy names it (`proxyReq`)
 * only once it has a connection, and with every pooled connection busy it waits in the agent's
 * queue: at its deadline it could not be cancelled there, and when a connection came free it was
 * handed that connection, then destroyed with it, one healthy connection lost per request that had
 * timed out. Cancelled while it waits, Node gives the connection back to the pool instead.
 */
function linkRequestsToExchanges(agent: http.Agent): void {
  const queued = agent as AgentWithQueue;
  const addRequest = queued.addRequest;
  queued.addRequest = function (req, options) {
    const exchange = options.headers?.[EXCHANGE] as InFlight | undefined;
    // One line past the limit is kept, so that an answer longer than it is seen and refused.
    req.maxHeadersCount = MAX_UPSTREAM_HEADER_LINES + 1;
    if (exchange !== undefined) {
      exchange.proxyReq = req;
      // The agent keeps the options of the request that opened a connection for the connection's
      // life: left on them, the link would keep that first exchange (its request and response) in
      // memory as long. (httpxy's copy of the headers; a second attempt finds it on req.headers.)
      // Cleared, not deleted: a delete turns the object into a hash table for the rest of its use.
      options.headers![EXCHANGE] = undefined;
    }
    addRequest.call(this, req, options);
  };
}

/** Lines about unasked bytes, at most one every this often (a broken upstream may do it on every request). */
const UNASKED_LINE_EVERY_MS = 10_000;
/** On a pooled connection while it is idle: its bytes read when it was put back in the pool. */
const READ_WHEN_IDLE = Symbol('bytes read when the connection went idle');
type PooledSocket = Duplex & { bytesRead: number; [READ_WHEN_IDLE]?: number };

/**
 * Counts and logs the idle pooled connections the upstream sent bytes on: an answer to no request,
 * such as a second answer to one request. Node's parser takes such bytes for a second answer to the
 * connection's last request and closes the connection without a word; and had a request been
 * waiting on it, it would have taken them for that request's answer, which HTTP/1.1 gives no way to
 * tell from the true one. The upstream's fault is not silent then: a connection that closes while
 * idle having read more than it had (an upstream closing an idle connection sends nothing) is one.
 * (One `close` listener added and removed per request.)
 */
function countUnaskedBytes(agent: http.Agent, logger: Logger, onUnasked: (() => void) | undefined): void {
  const line = lineThrottle(UNASKED_LINE_EVERY_MS);
  function onIdleClose(this: PooledSocket): void {
    const unasked = this.bytesRead - (this[READ_WHEN_IDLE] ?? this.bytesRead);
    if (unasked === 0) return;
    onUnasked?.();
    const heldBack = line('');
    if (heldBack !== null) {
      logger.error({ bytes: unasked, connections: heldBack.count + 1 }, 'the upstream sent bytes on an idle connection, an answer to no request; the connection was closed');
    }
  }
  // Both documented as the agent's to override (Node's http.Agent: keepSocketAlive, reuseSocket).
  const pooled = agent as unknown as { keepSocketAlive(socket: PooledSocket): boolean; reuseSocket(socket: PooledSocket, req: ClientRequest): void };
  const keepSocketAlive = pooled.keepSocketAlive;
  pooled.keepSocketAlive = function (socket) {
    const kept = keepSocketAlive.call(this, socket);
    if (kept) {
      socket[READ_WHEN_IDLE] = socket.bytesRead;
      socket.on('close', onIdleClose);
    }
    return kept;
  };
  const reuseSocket = pooled.reuseSocket;
  pooled.reuseSocket = function (socket, req) {
    socket.off('close', onIdleClose);
    reuseSocket.call(this, socket, req);
  };
}

/** One upstream exchange, kept on `res.locals.upstream` (a WeakMap would cost the collector per request). */
export interface InFlight {
  /** The exchange's one timer: the deadline for the upstream's headers, then the stall watch (watchExchange). */
  timer: NodeJS.Timeout | undefined;
  /** performance.now() when the request was forwarded. */
  startedAt: number;
  /** Once the answer streams: the client connection's bytes written when last looked at. */
  written: number;
  /** Once the answer streams: performance.now() since which nothing has been seen to move. */
  quietSince: number;
  proxyReq: ClientRequest | undefined;
  /** The upstream's answer, once its headers arrived and it is being passed on. */
  proxyRes: IncomingMessage | undefined;
  /** The response status is decided (upstream headers arrived, or the gateway answered with an error). */
  answered: boolean;
  /** The connection's bytes read when this request was given it: more at a failure means an answer had begun. */
  bytesReadAtStart: number;
  /** Sent again once already, on a new connection (see retriable). */
  retried: boolean;
  /** The request's own `next`, for a second attempt. */
  readonly next: NextFunction;
}

/** Idempotent methods without a body (RFC 9110 §9.2.2): the ones a client may repeat on its own. */
const SAFE_TO_REPEAT = new Set(['GET', 'HEAD']);

/**
 * The one failure worth a second attempt: a pooled keep-alive connection that failed before a single
 * byte of an answer came back, most likely closed by the upstream (idle too long on its side) just as
 * this request was sent on it. RFC 9110 §9.2.2 lets a GET or HEAD be repeated after exactly that
 * kind of failure; Node's documentation shows the pattern (`request.reusedSocket`). Once only, with
 * the client still there and the deadline not passed: a second failure gives 502.
 */
export function retriable(err: Error, req: IncomingMessage, state: InFlight): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  const proxyReq = state.proxyReq;
  return (
    !state.retried &&
    !state.answered &&
    proxyReq !== undefined &&
    proxyReq.reusedSocket &&
    proxyReq.socket?.bytesRead === state.bytesReadAtStart &&
    (code === 'ECONNRESET' || code === 'EPIPE') &&
    SAFE_TO_REPEAT.has(req.method ?? '') &&
    !req.socket.destroyed
  );
}

/**
 * Closes the pool's idle connections. When the upstream closed one, those idle longer are closed or
 * closing too (the pool hands out the most recent first), and a second attempt must not meet one.
 */
function dropIdleConnections(agent: http.Agent): void {
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

/** The one transfer coding Node's parser undoes (any other reaches the client still coded: UnsupportedTransferCodingError). */
const ONLY_CHUNKED = /^[ \t]*chunked[ \t]*$/i;

/** Error bodies are drained so the keep-alive connection survives, but only this much and this long. */
const DISCARD_MAX_BYTES = 64 * 1024;
const DISCARD_MAX_MS = 1000;

/**
 * Throws away an upstream body the client will never see. A small one is read to the end so its
 * connection can be reused; a large, slow or endless one is cut, so it cannot hold a pooled socket.
 */
function discard(body: IncomingMessage): void {
  let bytes = 0;
  const timer = setTimeout(() => body.destroy(), DISCARD_MAX_MS);
  timer.unref();
  body.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > DISCARD_MAX_BYTES) body.destroy();
  });
  body.once('close', () => clearTimeout(timer));
  body.on('error', () => {});
  body.resume();
}

/**
 * Forwards an allowed request: the path exactly as matched, the query unchanged, headers filtered
 * and the acquirer header set from the key. Responses stream back (flat memory for any size);
 * error statuses, failures and timeouts become documented gateway errors.
 */
export function createUpstreamProxy(options: UpstreamProxyOptions): RequestHandler {
  linkRequestsToExchanges(options.agent);
  countUnaskedBytes(options.agent, options.logger, options.onUnaskedBytes);
  const watchStreamedBody = options.collectYoung === undefined ? undefined : createStreamedMemory(options.collectYoung);
  // Parsed once. Host names the upstream, whatever the client sent; set with the other headers (httpxy's
  // changeOrigin would work it out again on every request).
  const target = new URL(options.target);
  const upstreamHost = target.host;
  const address = upstreamAddress(target);

  const fail = (res: ServerResponse, code: ErrorCode, err?: unknown) => {
    const locals = (res as Response).locals;
    locals.errorCode = code;
    options.logger.warn({ err, code, route: locals.route?.id, request_id: locals.requestId }, 'upstream request failed');
    sendError(res, ERROR_CODES[code].status, locals.requestId);
  };

  /**
   * One timer per exchange, every `periodMs` (at most the shorter limit), set when the request is
   * forwarded and cleared when the response closes: two timers per request (one for the headers, a
   * second once the answer streamed) cost a tenth of the main thread's time per proxied request
   * (bench/RESULTS.md, 2026-11-24); one that just keeps going costs half of that.
   * Before the upstream's headers it is the deadline: once `timeoutMs` have passed the request is
   * cancelled (freeing its pooled connection) and answered 504. Once the answer streams, an exchange
   * on which nothing moves for `idleTimeoutMs` is cut: a client that stopped reading, or an upstream
   * that stopped sending, would otherwise hold a pooled upstream connection for as long as the client
   * keeps its own open, and a few hundred such clients would hold them all. Progress is the client
   * connection's bytes written, compared at each tick: no work per chunk. Quiet is counted from the
   * last tick that saw progress, so a stall is cut after at least
   * `idleTimeoutMs`, and before `idleTimeoutMs` rounded up to whole periods plus one period (60-90 s
   * with the defaults, where the idle time is two periods).
   */
  // The deadline falls on a tick, and a tick comes at least every idleTimeoutMs.
  const periodMs = Math.ceil(options.timeoutMs / Math.ceil(options.timeoutMs / options.idleTimeoutMs));
  // Timers fire by a clock counted in whole milliseconds: up to one early by performance.now().
  const CLOCK_SLACK_MS = 1;
  const watchExchange = (state: InFlight, res: Response): void => {
    const now = performance.now() + CLOCK_SLACK_MS;
    const proxyRes = state.proxyRes;
    if (!state.answered) {
      if (now - state.startedAt < options.timeoutMs) return void state.timer?.refresh();
      state.answered = true;
      // Without a connection yet, it waited for one of the pool's: the upstream never saw it.
      res.locals.upstreamErrorKind = state.proxyReq !== undefined && !state.proxyReq.socket ? 'pool_exhausted' : 'timeout';
      state.proxyReq?.destroy();
      fail(res, 'UPSTREAM_TIMEOUT');
      return;
    }
    const socket = res.socket;
    // Answered by the gateway itself (an error, a mapped status), or already finished: nothing
    // streams. (An exchange starts only once its answer has the connection: upstreamProxy.)
    if (proxyRes === undefined || socket === null) return;
    if (socket.bytesWritten !== state.written) {
      state.written = socket.bytesWritten;
      state.quietSince = now;
    }
    if (now - state.quietSince < options.idleTimeoutMs) return void state.timer?.refresh();
    // Bytes waiting for the client: it stopped reading. None: the upstream stopped sending.
    const stalled = socket.writableLength > 0 ? 'client' : 'upstream';
    options.logger.warn({ stalled, idle_ms: options.idleTimeoutMs, route: res.locals.route?.id, request_id: res.locals.requestId }, 'a streaming answer stalled: connections cut');
    // Either way the upstream connection is destroyed, never pooled mid-answer: by hand when it
    // stalled, else by httpxy, which cancels the upstream request when the client's connection goes.
    // (Cut by hand for a stalling client, its close would count as an upstream reset.)
    if (stalled === 'upstream') {
      res.locals.upstreamErrorKind = 'stalled';
      proxyRes.destroy();
      // Its headers came, and none of its body: nothing of the answer has gone out yet.
      if (!res.headersSent) return fail(res, 'UPSTREAM_TIMEOUT');
    }
    cutResponse(res);
  };

  const gatewayPlugin: Plugin = (proxyServer) => {
    proxyServer.on('proxyReq', (proxyReq: ClientRequest, req: IncomingMessage, res: ServerResponse) => {
      const state = (res as Response).locals.upstream;
      if (state === undefined) return;
      state.proxyReq = proxyReq;
      state.bytesReadAtStart = proxyReq.socket?.bytesRead ?? 0;
      // Upgrade is never forwarded, so a 101 answers nothing the gateway asked. With no listener,
      // Node closes the connection without an error, and the client would wait for the 504.
      proxyReq.on('upgrade', (_upgraded: IncomingMessage, socket: Socket) => {
        socket.destroy();
        onProxyError(new UnexpectedUpgradeError(), req, res);
      });
      // Answered meanwhile (a request cancelled in the agent's queue never gets here: linkRequestsToExchanges).
      if (state.answered) proxyReq.destroy();
    });

    proxyServer.on('proxyRes', (proxyRes: IncomingMessage, _req: IncomingMessage, res: ServerResponse) => {
      const state = (res as Response).locals.upstream;
      if (state === undefined || state.answered) {
        proxyRes.destroy();
        return;
      }
      state.answered = true;
      const locals = (res as Response).locals;
      locals.upstreamMs = performance.now() - state.startedAt;
      if (proxyRes.rawHeaders.length > 2 * MAX_UPSTREAM_HEADER_LINES) {
        proxyRes.destroy();
        locals.upstreamErrorKind = 'protocol';
        fail(res, 'UPSTREAM_UNREACHABLE', new TooManyHeaderLinesError(MAX_UPSTREAM_HEADER_LINES));
        return;
      }
      const mapped = mapUpstreamStatus(proxyRes.statusCode ?? 502, locals.policy.upstreamStatusMap);
      if (mapped !== null) {
        discard(proxyRes);
        locals.upstreamStatus = proxyRes.statusCode;
        sendError(res, mapped, locals.requestId, mapped === 416 ? unsatisfiedRange(proxyRes.headers) : undefined);
        return;
      }
      const status = proxyRes.statusCode!;
      const codings = proxyRes.headers['transfer-encoding'];
      // Only where a body is passed on: a redirect's is dropped, and a 204 or 304 has none.
      if (codings !== undefined && !ONLY_CHUNKED.test(codings) && !hasDroppedBody(status) && status !== 204 && status !== 304) {
        proxyRes.destroy();
        locals.upstreamErrorKind = 'protocol';
        fail(res, 'UPSTREAM_UNREACHABLE', new UnsupportedTransferCodingError(codings));
        return;
      }
      const headers = buildClientHeaders(status, proxyRes.headers, locals.requestId, address, locals.policy.acquirerHeader);
      // Written with the body's first byte or its end (forwardBody), not now: Node would hold the head
      // back until then anyway, and an upstream that fails before it can still be answered 502.
      const writeHead = (): boolean => {
        try {
          res.writeHead(status, headers);
        } catch (err) {
          // Headers Node will not send on (e.g. invalid characters): the answer is unusable, not fatal.
          proxyRes.destroy();
          fail(res, 'UPSTREAM_UNREACHABLE', err);
          return false;
        }
        if (!res.chunkedEncoding && headers['content-length'] === undefined) noteBodyEndsWithConnection(res);
        return true;
      };
      if (hasDroppedBody(status)) {
        discard(proxyRes);
        if (writeHead()) res.end();
        return;
      }
      // Cut after the headers (Node reports a body cut short as an error): an upstream failure, not
      // a success. The client is cut here, before httpxy's listener closes its connection, which an
      // HTTP/1.0 client would take for the end of the body. (A client that left destroys the answer
      // without an error: not the upstream's failure.)
      proxyRes.on('error', (err) => {
        if (proxyRes.complete) return; // whole: what failed came after it (onProxyError)
        failAnswer(res, err, 'reset');
      });
      state.proxyRes = proxyRes;
      state.written = res.socket?.bytesWritten ?? 0;
      state.quietSince = performance.now();
      forwardBody(proxyRes, res, writeHead);
      watchStreamedBody?.(proxyRes);
    });

    proxyServer.on('error', onProxyError);
  };

  function onProxyError(err: Error, req?: IncomingMessage, res?: ServerResponse | Socket): void {
    if (!(res instanceof http.ServerResponse)) {
      res?.destroy();
      return;
    }
    const state = (res as Response).locals.upstream;
    if (state !== undefined && req !== undefined && retriable(err, req, state)) {
      state.retried = true;
      state.proxyReq = undefined;
      dropIdleConnections(options.agent);
      options.onRetry?.();
      options.logger.warn(
        { code: (err as NodeJS.ErrnoException).code, route: (res as Response).locals.route?.id, request_id: (res as Response).locals.requestId },
        'a pooled upstream connection failed before any answer (closed by the upstream as it was reused): sent again on a new one',
      );
      void proxy(req, res as Response, state.next);
      return;
    }
    if (state !== undefined && !state.answered) {
      clearTimeout(state.timer);
      state.answered = true;
      (res as Response).locals.upstreamErrorKind = classifyUpstreamError(err);
      fail(res, 'UPSTREAM_UNREACHABLE', err);
    } else if (state?.proxyRes?.complete === true) {
      // The whole answer had arrived; what failed came after it on the connection (bytes after
      // a complete body, or a body after a 204). Node closes that connection, never to be
      // reused; the client gets the answer as it was framed, and never the stray bytes.
      (res as Response).locals.upstreamErrorKind ??= classifyUpstreamError(err);
      options.logger.warn(
        { code: (err as NodeJS.ErrnoException).code, route: (res as Response).locals.route?.id, request_id: (res as Response).locals.requestId },
        'the upstream sent bytes after a complete answer: its connection was closed',
      );
    } else if (!res.writableEnded) {
      failAnswer(res, err, classifyUpstreamError(err));
    }
  }

  /**
   * The upstream failed after its headers, before its body's end. Before the body's first byte
   * nothing of the answer has gone out, and the client gets the whole 502 any other failure gets.
   * Once the body streams, the connection is cut so that the client sees a truncated answer, never
   * a complete-looking short one.
   */
  function failAnswer(res: ServerResponse, err: Error, kind: UpstreamErrorKind): void {
    if (res.destroyed) return;
    (res as Response).locals.upstreamErrorKind ??= kind;
    if (res.headersSent) cutResponse(res);
    else fail(res, 'UPSTREAM_UNREACHABLE', err);
  }

  const proxy = createProxyMiddleware({
    // Parsed once here: given the string, http-proxy-middleware and httpxy would each parse it
    // again for every request.
    target,
    agent: options.agent,
    selfHandleResponse: true,
    ejectPlugins: true,
    plugins: [gatewayPlugin],
  });

  const forward: RequestHandler = (req, res, next) => {
    // The client may have left while its key was looked up, or while its request waited for the
    // connection: nothing to forward on its behalf.
    if (req.socket.destroyed) return;
    const { policy, key, requestId } = res.locals;
    const state: InFlight = { timer: undefined, startedAt: performance.now(), written: 0, quietSince: 0, proxyReq: undefined, proxyRes: undefined, answered: false, bytesReadAtStart: 0, retried: false, next };
    const headers = buildUpstreamHeaders(req.headers, policy.acquirerHeader, key!.acquirerId, requestId);
    headers.host = upstreamHost;
    (headers as Record<PropertyKey, unknown>)[EXCHANGE] = state;
    req.headers = headers as typeof req.headers;
    state.timer = setTimeout(() => watchExchange(state, res), periodMs);
    res.locals.upstream = state;
    // A client that goes away takes its upstream request with it (httpxy destroys proxyReq on close).
    res.on('close', () => clearTimeout(state.timer)); // closes once: `on` spares once's wrapper
    sendSoon(res);
  };

  /**
   * Sends a judged request upstream, with the others of its turn of the event loop (send-together.ts).
   * Its deadline and its upstream time count from `forward`, the wait included: the time its client
   * waited for the upstream's answer.
   */
  const sendSoon = createSendTogether((res: Response) => {
    const req = res.req;
    const state = res.locals.upstream!;
    // Gone while it waited (its response closed, and its share and timer with it), or already
    // answered by the gateway: nothing to send for it.
    if (req.socket.destroyed || state.answered) return;
    try {
      proxy(req, res, state.next).then(undefined, (err: unknown) => state.next(err || new Error('Rejected promise')));
    } catch (err) {
      // Not thrown into the others of its batch, nor out of the turn (which would end the process).
      state.next(err || new Error('Thrown without a reason'));
    }
  });

  // A pipelined request reaches this step only once its answer has the connection (server.ts): so
  // each client connection holds at most one pooled upstream connection at a time.
  return forward;
}
