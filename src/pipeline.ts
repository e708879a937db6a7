import type { RequestHandler } from 'express';
import type { KeyResolver } from './keys/key-resolver.js';
import type { IpAllowlist } from './net/ip-allowlist.js';
import { createApiKeyAuth } from './plugins/api-key-auth.js';
import { createDispatch } from './plugins/dispatch.js';
import { createIpWhitelist } from './plugins/ip-whitelist.js';
import { createPermissions } from './plugins/permissions.js';
import { createRequestGuard } from './plugins/request-guard.js';
import { createRouteMatch } from './plugins/route-match.js';

export interface PipelineDeps {
  readonly resolver: KeyResolver;
  readonly trustedProxies: IpAllowlist | null;
  readonly proxy: RequestHandler;
}

/**
 * The one ordered list of steps every request goes through. The order is the API's contract
 * (authenticate, client address, route, permission, serve or proxy), after a guard against
 * ambiguous framing; a unit test pins it.
 */
export function createPipeline(deps: PipelineDeps): RequestHandler[] {
  return [
    createRequestGuard(),
    createApiKeyAuth(deps),
    createIpWhitelist(deps),
    createRouteMatch(),
    createPermissions(),
    createDispatch(deps),
  ];
}
