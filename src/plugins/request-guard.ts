import type { RequestHandler } from 'express';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * Step 0: requests whose framing the gateway and the upstream could read differently are refused
 * before anything else: HTTP/1.1 without Host (Node's own refusal has no body, so the server lets
 * it through to here) and more than one Host.
 */
export function createRequestGuard(): RequestHandler {
  return function requestGuard(req, _res, next) {
    let hosts = 0;
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hosts++;
    }
    if (hosts > 1 || (hosts === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1)) throw new GatewayError('BAD_REQUEST');
    next();
  };
}
