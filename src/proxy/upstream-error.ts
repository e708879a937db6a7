/**
 * @module
 * http-proxy-middleware's `on.error`: an upstream request that failed is sent once more when that is
 * safe (retry.ts), otherwise answered 502 or cut; bytes after a complete answer are only logged.
 * Also the line for bytes the upstream sends on an idle pooled connection.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Response } from 'express';
import { classifyUpstreamError } from '../errors/upstream-errors.js';
import type { Logger } from '../observability/logger/logger.js';
import { lineThrottle } from '../observability/line-throttle.js';
import type { Exchange } from './exchange.js';
import { fail, failAnswer } from './failures.js';
import { retriable } from './retry.js';
import type { UpstreamAgent } from './upstream-agent.js';

export interface UpstreamErrorContext {
  readonly logger: Logger;
  readonly agent: UpstreamAgent;
  /** Sends the exchange's request again, on a new connection. */
  readonly resend: (exchange: Exchange) => void;
  /** Called once for each request sent a second time. */
  readonly onRetry?: (() => void) | undefined;
}

export function onUpstreamError(err: Error, req: IncomingMessage | undefined, res: ServerResponse | Socket | undefined, ctx: UpstreamErrorContext): void {
  if (!(res instanceof http.ServerResponse)) return void res?.destroy();
  const locals = (res as Response).locals;
  const exchange = locals.upstream;
  const code = (err as NodeJS.ErrnoException).code;
  if (exchange !== undefined && req !== undefined && retriable(err, req, exchange)) {
    exchange.retried = true;
    exchange.proxyReq = undefined;
    ctx.agent.dropIdleConnections();
    ctx.onRetry?.();
    ctx.logger.event('upstream_retried', { code, route: locals.route?.id, request_id: locals.requestId });
    return ctx.resend(exchange);
  }
  if (exchange !== undefined && !exchange.answered) {
    clearTimeout(exchange.timer);
    exchange.answered = true;
    locals.upstreamErrorKind = classifyUpstreamError(err);
    fail(res, 'UPSTREAM_UNREACHABLE', ctx.logger, err);
  } else if (exchange?.proxyRes?.complete === true) {
    // The whole answer had arrived; what failed came after it on the connection (bytes after a
    // complete body, or a body after a 204). Node closes that connection, never to be reused; the
    // client gets the answer as it was framed, and never the stray bytes.
    locals.upstreamErrorKind ??= classifyUpstreamError(err);
    ctx.logger.event('upstream_bytes_after_answer', { code, route: locals.route?.id, request_id: locals.requestId });
  } else if (!res.writableEnded) {
    failAnswer(res, err, classifyUpstreamError(err), ctx.logger);
  }
}

/** Lines about unasked bytes, at most one every this often (a broken upstream may do it on every request). */
const UNASKED_LINE_EVERY_MS = 10_000;

/**
 * The pool's `onUnaskedBytes`: counted each time, logged at most once a period with how many
 * connections. An upstream that answers a request twice can give another client that answer.
 */
export function unaskedBytesReporter(logger: Logger, count: (() => void) | undefined): (bytes: number) => void {
  const line = lineThrottle(UNASKED_LINE_EVERY_MS);
  return (bytes) => {
    count?.();
    const heldBack = line('');
    if (heldBack !== null) logger.event('upstream_unasked_bytes', { bytes, connections: heldBack.count + 1 });
  };
}
