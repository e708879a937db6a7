import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { declaresBody } from '../../net/request-body.js';
import { queryAllowed } from '../../policy/match-route.js';

/**
 * Step 5: what the route takes besides its path: only the query parameters it declares, and no body.
 * After the permission check, as the API document has it: calling an endpoint without the permission
 * it requires gives 403, whatever else is wrong with the call (and a key without the permission
 * learns nothing of what the endpoint takes).
 */
export function createRequestShape(): RequestHandler {
  return function requestShape(req, res, next) {
    if (!queryAllowed(res.locals.route!, req.url)) throw new GatewayError('QUERY_NOT_ALLOWED');
    // Every route declared today takes no body; one that arrived anyway would travel unjudged.
    if (declaresBody(req.headers)) throw new GatewayError('BAD_REQUEST');
    next();
  };
}
