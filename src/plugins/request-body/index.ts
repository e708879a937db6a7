import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { bodyRefusal, readBody } from './read-body.js';

/** `Expect: 100-continue` as Node's server reads it (`_http_server.js`), which it honours for HTTP/1.1 alone. */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i;

/**
 * Step 7: the body of a route that takes one, its head already judged (the request-shape step) and
 * the acquirer's share taken: asked for (100 Continue) only now, read whole, checked as JSON, and
 * kept for the proxy to send as it came.
 */
export function createRequestBody(): RequestHandler {
  return function requestBody(req, res, next) {
    const rule = res.locals.route!.body;
    if (rule === undefined) return next();
    if (req.httpVersionMinor === 1 && CONTINUE.test(req.headers.expect ?? '')) res.writeContinue();
    readBody(req, res, rule.maxBytes).then((body) => {
      res.locals.bodyBytes = body.length;
      const refusal = bodyRefusal(body, res.locals.policy.tenantFields);
      if (refusal !== null) return next(new GatewayError(refusal));
      res.locals.body = body;
      next();
    }, next);
  };
}
