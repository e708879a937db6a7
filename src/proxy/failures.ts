/**
 * @module
 * What the client gets when the upstream fails: the documented 502 or 504 while nothing of the
 * answer has gone out, a cut connection once its body streams (so the client sees the truncation).
 */
import type { ServerResponse } from 'node:http';
import type { Response } from 'express';
import { ERROR_CODES, type ErrorCode } from '../errors/codes.js';
import { cutResponse, sendError } from '../errors/error-response.js';
import type { UpstreamErrorKind } from '../errors/upstream-errors.js';
import type { Logger } from '../observability/logger/logger.js';
import type { Exchange, WatchVerdict } from './exchange.js';
import type { UpstreamAgent } from './upstream-agent.js';

/** Answers `res` with the documented error for `code`, logged with the failure (a timeout has none). */
export function fail(res: ServerResponse, code: ErrorCode, logger: Logger, err?: unknown): void {
  const locals = (res as Response).locals;
  locals.errorCode = code;
  logger.event('upstream_request_failed', { err, code, route: locals.route?.id, request_id: locals.requestId });
  sendError(res, ERROR_CODES[code].status, locals.requestId);
}

/**
 * The upstream failed after its headers, before its body's end. Before the body's first byte
 * nothing of the answer has gone out, and the client gets the whole 502 any other failure gets.
 * Once the body streams, the connection is cut so that the client sees a truncated answer, never
 * a complete-looking short one.
 */
export function failAnswer(res: ServerResponse, err: Error, kind: UpstreamErrorKind, logger: Logger): void {
  if (res.destroyed) return;
  (res as Response).locals.upstreamErrorKind ??= kind;
  if (res.headersSent) cutResponse(res);
  else fail(res, 'UPSTREAM_UNREACHABLE', logger, err);
}

/**
 * What the exchange's timer decided. At the deadline the request is cancelled (freeing its pooled
 * connection, or its place in the pool's queue) and answered 504. A stall cuts both connections;
 * the upstream one is destroyed, never pooled mid-answer (a stalled client's goes with its response:
 * create-proxy.ts).
 */
export function onWatchVerdict(exchange: Exchange, verdict: WatchVerdict, { logger, agent, idleTimeoutMs }: { logger: Logger; agent: UpstreamAgent; idleTimeoutMs: number }): void {
  const res = exchange.res;
  if (verdict === 'deadline') {
    exchange.answered = true;
    // Still in the pool's queue: it waited for a connection, and the upstream never saw it.
    const queued = exchange.proxyReq === undefined ? agent.takeWaiting(exchange.id) : undefined;
    res.locals.upstreamErrorKind = queued !== undefined ? 'pool_exhausted' : 'timeout';
    (queued ?? exchange.proxyReq)?.destroy();
    return fail(res, 'UPSTREAM_TIMEOUT', logger);
  }
  const stalled = verdict === 'stalled_client' ? 'client' : 'upstream';
  logger.event('upstream_stalled', { stalled, idle_ms: idleTimeoutMs, route: res.locals.route?.id, request_id: res.locals.requestId });
  if (stalled === 'upstream') {
    res.locals.upstreamErrorKind = 'stalled';
    exchange.proxyRes?.destroy();
    // Its headers came, and none of its body: nothing of the answer has gone out yet.
    if (!res.headersSent) return fail(res, 'UPSTREAM_TIMEOUT', logger);
  }
  cutResponse(res);
}
