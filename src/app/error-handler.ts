import type { ErrorRequestHandler } from 'express';
import { GatewayError } from '../errors/gateway-error.js';
import { sendError } from '../errors/error-response.js';
import type { Logger } from '../observability/logger/logger.js';
import { lineThrottle } from '../observability/line-throttle.js';

/**
 * How often, at most, the line of one failure is written: the same code with the same cause's
 * message. A failure every request meets while it lasts (Redis down: 503 for every key not cached)
 * would otherwise write a stack for each, about four times the log of a normal request, for any
 * client sending random keys; failures that differ (each unreadable key record, named in its
 * message) are each written. Each request's access line still names its code.
 */
export const FAILURE_LINE_EVERY_MS = 1000;

/**
 * The Express error handler: every thrown or passed error ends here. Known refusals carry their code;
 * anything else is a fault of ours, logged in full and answered with the generic 500 body.
 * `now`: milliseconds on a monotonic clock.
 */
export function createErrorHandler(logger: Logger, now: () => number = () => performance.now()): ErrorRequestHandler {
  const failureLine = lineThrottle(FAILURE_LINE_EVERY_MS, { now });
  const logFailure = (err: GatewayError) => {
    const heldBack = failureLine(`${err.code}\u0000${err.cause instanceof Error ? err.cause.message : ''}`);
    if (heldBack === null) return;
    // Those left out came in the second after the line before this one, which may be long ago: when it was is said too.
    const leftOut = heldBack.count > 0 ? { same_failures_unwritten: heldBack.count, unwritten_after_ms_ago: heldBack.lastWrittenMsAgo } : {};
    logger.event('request_failed', { err: err.cause ?? err, code: err.code, ...leftOut });
  };
  return function gatewayErrorHandler(err: unknown, _req, res, _next) {
    if (err instanceof GatewayError) {
      res.locals.errorCode = err.code;
      if (err.status >= 500) logFailure(err);
      sendError(res, err.status, res.locals.requestId, err.headers);
      return;
    }
    res.locals.errorCode = 'INTERNAL';
    logger.event('unexpected_error', { err });
    sendError(res, 500, res.locals.requestId);
  };
}
