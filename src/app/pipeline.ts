import type { RequestHandler } from 'express';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { IpAllowlist } from '../net/ip-allowlist.js';
import { createAcquirerShare } from '../plugins/acquirer-share/index.js';
import { createApiKeyAuth } from '../plugins/api-key-auth/index.js';
import { createDispatch } from '../plugins/dispatch/index.js';
import { createIpWhitelist } from '../plugins/ip-whitelist/index.js';
import { createPermissions } from '../plugins/permissions/index.js';
import { createRateLimit, type RateLimitDeps } from '../plugins/rate-limit/index.js';
import { createRequestBody } from '../plugins/request-body/index.js';
import { createRequestGuard } from '../plugins/request-guard/index.js';
import { createRequestShape } from '../plugins/request-shape/index.js';
import { createRouteMatch } from '../plugins/route-match/index.js';

export interface PipelineDeps extends RateLimitDeps {
  readonly resolver: KeyResolver;
  readonly trustedProxies: IpAllowlist | null;
  readonly proxy: RequestHandler;
  /** ACQUIRER_MAX_IN_FLIGHT (createAcquirerShare's default when absent). */
  readonly acquirerMaxInFlight?: number | undefined;
}

/**
 * The one ordered list of steps every request goes through. The order is the API's contract
 * (authenticate, client address, route, permission, what the route takes as far as the head shows,
 * the key's rate, the acquirer's share, the body, serve or proxy), after a guard against ambiguous
 * framing; a unit test pins it.
 */
export function createPipeline(deps: PipelineDeps): RequestHandler[] {
  return [
    createRequestGuard(),
    createApiKeyAuth(deps),
    createIpWhitelist(deps),
    createRouteMatch(),
    createPermissions(),
    createRequestShape(),
    createRateLimit(deps),
    createAcquirerShare(deps),
    createRequestBody(),
    createDispatch(deps),
  ].map(failClosed);
}

/**
 * Express's router takes some throws for a step's verdict: a falsy value (`throw undefined`) as a
 * pass, `'route'` and `'router'` as skips. A step that fails must never let the request go on, so
 * anything thrown that is not an Error becomes one.
 */
export function failClosed(step: RequestHandler): RequestHandler {
  const guarded: RequestHandler = (req, res, next) => {
    try {
      return step(req, res, next);
    } catch (thrown) {
      throw thrown instanceof Error ? thrown : new Error(`${step.name} threw ${String(thrown)}`);
    }
  };
  return Object.defineProperty(guarded, 'name', { value: step.name });
}
