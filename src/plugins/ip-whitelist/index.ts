import type { RequestHandler } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import { clientText, peerAddress, requestClient } from '../../net/client-address.js';
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
      const client = requestClient(peerAddress(req.socket), req.headers, trustedProxies);
      res.locals.clientAddress = clientText(client);
      if (client === null || !allowlist.contains(client)) throw new GatewayError('IP_NOT_ALLOWED');
    }
    next();
  };
}
