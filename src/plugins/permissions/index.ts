import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';

/** Step 4: the key must carry every permission the route requires. */
export function createPermissions(): RequestHandler {
  return function permissions(_req, res, next) {
    const granted = res.locals.key!.permissions;
    for (const required of res.locals.route!.permissions) {
      if (!granted.has(required)) throw new GatewayError('PERMISSION_DENIED');
    }
    next();
  };
}
