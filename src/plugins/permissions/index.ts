import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { missingPermissions } from '../../policy/route-access.js';

/** Step 4: the key must carry every permission the route requires. */
export function createPermissions(): RequestHandler {
  return function permissions(_req, res, next) {
    if (missingPermissions(res.locals.key!.permissions, res.locals.route!.permissions).length > 0) throw new GatewayError('PERMISSION_DENIED');
    next();
  };
}
