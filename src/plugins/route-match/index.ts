import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { matchRoute } from '../../policy/match-route.js';

/**
 * Step 3: the method and the raw request-target's path must match a route of the policy. Nothing
 * else, and nothing in a non-canonical spelling, ever reaches the upstream. Sets `res.locals.route`.
 */
export function createRouteMatch(): RequestHandler {
  return function routeMatch(req, res, next) {
    const match = matchRoute(res.locals.policy, req.method, req.url);
    if (match.kind === 'non_canonical') throw new GatewayError('NON_CANONICAL_PATH');
    if (match.kind === 'not_found') throw new GatewayError('ROUTE_NOT_FOUND');
    res.locals.route = match.route;
    next();
  };
}
