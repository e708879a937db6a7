import type { ErrorRequestHandler } from 'express';
import { GatewayError } from './gateway-error.js';
import { sendError } from './error-response.js';
import type { Logger } from '../logger.js';

/**
 * The Express error handler: every thrown or passed error ends here. Known refusals carry their code;
 * anything else is a fault of ours, logged in full and answered with the generic 500 body.
 */
export function createErrorHandler(logger: Logger): ErrorRequestHandler {
  return function gatewayErrorHandler(err: unknown, _req, res, _next) {
    if (err instanceof GatewayError) {
      res.locals.errorCode = err.code;
      if (err.status >= 500) logger.error({ err: err.cause ?? err, code: err.code }, 'request failed');
      sendError(res, err.status, res.locals.requestId);
      return;
    }
    res.locals.errorCode = 'INTERNAL';
    logger.error({ err }, 'unexpected error');
    sendError(res, 500, res.locals.requestId);
  };
}
