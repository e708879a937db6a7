import type { RequestHandler } from 'express';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { IpAllowlist } from '../net/ip-allowlist.js';
import { createApiKeyAuth } from '../plugins/api-key-auth/index.js';
import { createDispatch } from '../plugins/dispatch/index.js';
import { createIpWhitelist } from '../plugins/ip-whitelist/index.js';
import { createPermissions } from '../plugins/permissions/index.js';
import { createRequestGuard } from '../plugins/request-guard/index.js';
import { createRequestShape } from '../plugins/request-shape/index.js';
import { createRouteMatch } from '../plugins/route-match/index.js';

export interface PipelineDeps {
  readonly resolver: KeyResolver;
  readonly trustedProxies: IpAllowlist | null;
  readonly proxy: RequestHandler;
  /** ACQUIRER_MAX_IN_FLIGHT (createDispatch's default when absent). */
  readonly acquirerMaxInFlight?: number | undefined;
}

/**
 * The one ordered list of steps every request goes through. The order is the API's contract
 * (authenticate, client address, route, permission, the route's query and body, serve or proxy),
 * after a guard against ambiguous framing; a unit test pins it.
 */
export function createPipeline(deps: PipelineDeps): RequestHandler[] {
  return [
    createRequestGuard(),
    createApiKeyAuth(deps),
    createIpWhitelist(deps),
    createRouteMatch(),
    createPermissions(),
    createRequestShape(),
    createDispatch(deps),
  ].map(failClosed);
}

/**
 * Express's router takes a step that throws a falsy value (`throw undefined`) for one that passed,
 * and runs the next: a step that fails must never let the request go on, so such a throw is an error.
 */
export function failClosed(step: RequestHandler): RequestHandler {
  const guarded: RequestHandler = (req, res, next) => {
    try {
      return step(req, res, next);
    } catch (thrown) {
      throw thrown || new Error(`${step.name} threw ${String(thrown)}`);
    }
  };
  return Object.defineProperty(guarded, 'name', { value: step.name });
}
