import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { addressText, peerAddress, resolveClientAddress } from '../../net/client-address.js';
import type { IpAllowlist } from '../../net/ip-allowlist.js';

export interface IpWhitelistDeps {
  readonly trustedProxies: IpAllowlist | null;
}

/**
 * Step 2: a key with a whitelist is usable only from inside it. Refused with the same 401 as an
 * unknown key, so a stolen key used from elsewhere learns nothing about its own validity.
 */
export function createIpWhitelist({ trustedProxies }: IpWhitelistDeps): RequestHandler {
  return function ipWhitelist(req, res, next) {
    const allowlist = res.locals.key!.allowlist;
    if (allowlist !== null) {
      const forwardedFor = req.headers['x-forwarded-for'];
      const client = resolveClientAddress(peerAddress(req.socket), typeof forwardedFor === 'string' ? forwardedFor : undefined, trustedProxies);
      res.locals.clientAddress = client === null ? null : addressText(client);
      if (client === null || !allowlist.contains(client)) throw new GatewayError('IP_NOT_ALLOWED');
    }
    next();
  };
}
