/**
 * @module
 * The one upstream failure worth a second attempt: a pooled keep-alive connection that failed
 * before a single byte of an answer came back, most likely closed by the upstream (idle too long on
 * its side) just as this request was sent on it.
 */
import type { IncomingMessage } from 'node:http';
import type { Exchange } from './exchange.js';

/** Idempotent methods without a body (RFC 9110 §9.2.2): the ones a client may repeat on its own. */
const SAFE_TO_REPEAT = new Set(['GET', 'HEAD']);

/**
 * RFC 9110 §9.2.2 lets a GET or HEAD be repeated after exactly that kind of failure; Node's
 * documentation shows the pattern (`request.reusedSocket`). Once only, with the client still there
 * and the deadline not passed: a second failure gives 502.
 */
export function retriable(err: Error, req: IncomingMessage, exchange: Exchange): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  const proxyReq = exchange.proxyReq;
  return (
    !exchange.retried &&
    !exchange.answered &&
    proxyReq !== undefined &&
    proxyReq.reusedSocket &&
    proxyReq.socket?.bytesRead === exchange.bytesReadAtStart &&
    (code === 'ECONNRESET' || code === 'EPIPE') &&
    SAFE_TO_REPEAT.has(req.method ?? '') &&
    !req.socket.destroyed
  );
}
