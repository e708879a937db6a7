import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { declaresBody } from '../../net/request-body.js';
import { queryAllowed } from '../../policy/match-query.js';
import { bodyRefusal, judgeBodyHead, readBody } from './body.js';

/** `Expect: 100-continue`, in any case (RFC 9110 §10.1.1). */
const CONTINUE = /^100-continue$/i;

/**
 * Step 5: what the route takes besides its path: only the query parameters it declares, and the body
 * it declares or none. After the permission check, as the API document has it: calling an endpoint
 * without the permission it requires gives 403, whatever else is wrong with the call (and a key
 * without the permission learns nothing of what the endpoint takes). A body is asked for (100
 * Continue) only once its head is judged, and goes on only once it is whole and checked.
 */
export function createRequestShape(): RequestHandler {
  return function requestShape(req, res, next) {
    const route = res.locals.route!;
    if (!queryAllowed(route, req.url)) throw new GatewayError('QUERY_NOT_ALLOWED');
    const rule = route.body;
    if (rule === undefined) {
      // A body on a route that takes none would travel unjudged.
      if (declaresBody(req.headers)) throw new GatewayError('BAD_REQUEST');
      return next();
    }
    judgeBodyHead(req, rule);
    if (CONTINUE.test(req.headers.expect ?? '')) res.writeContinue();
    readBody(req, res, rule.maxBytes).then((body) => {
      const refusal = bodyRefusal(body, res.locals.policy.tenantFields);
      if (refusal !== null) return next(new GatewayError(refusal));
      res.locals.body = body;
      next();
    }, next);
  };
}
