import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { declaresBody } from '../../net/request-body.js';
import { queryAllowed } from '../../policy/match-query.js';
import { judgeBodyHead } from '../request-body/read-body.js';

/**
 * Step 5: what the route takes besides its path, as far as the request's head shows it: only the
 * query parameters it declares, and the body it declares (its media type and declared length) or
 * none. After the permission check, as the API document has it: calling an endpoint without the
 * permission it requires gives 403, whatever else is wrong with the call (and a key without the
 * permission learns nothing of what the endpoint takes).
 */
export function createRequestShape(): RequestHandler {
  return function requestShape(req, res, next) {
    const route = res.locals.route!;
    if (!queryAllowed(route, req.url)) throw new GatewayError('QUERY_NOT_ALLOWED');
    // A body on a route that takes none would travel unjudged.
    if (route.body === undefined) {
      if (declaresBody(req.headers)) throw new GatewayError('BAD_REQUEST');
    } else {
      judgeBodyHead(req, route.body);
    }
    next();
  };
}
