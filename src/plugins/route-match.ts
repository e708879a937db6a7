import type { RequestHandler } from 'express';
import { GatewayError } from '../errors/gateway-error.js';
import { matchRoute } from '../policy/match-route.js';

/**
 * Step 3: the method and the raw request-target must match a route of the policy. Nothing else, and
 * nothing in a non-canonical spelling, ever reaches the upstream. Sets `res.locals.route`.
 */
export function createRouteMatch(): RequestHandler {
  return function routeMatch(req, res, next) {
    const match = matchRoute(res.locals.policy, req.method, req.url);
    if (match.kind === 'non_canonical') throw new GatewayError('NON_CANONICAL_PATH');
    if (match.kind === 'not_found') throw new GatewayError('ROUTE_NOT_FOUND');
    if (match.kind === 'query_not_allowed') {
      res.locals.route = match.route;
      throw new GatewayError('QUERY_NOT_ALLOWED');
    }
    // Every route declared today takes no body; one that arrived anyway would travel unjudged.
    if (req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0') {
      throw new GatewayError('BAD_REQUEST');
    }
    res.locals.route = match.route;
    next();
  };
}
