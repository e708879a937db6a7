import type { NextFunction, RequestHandler } from 'express';
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
  ];
}

/**
 * Steps as one Express middleware, run in order. Given to Express as separate middleware, each step
 * would get a router layer of its own, and a layer costs a path match, a params merge and a few
 * closures per request (about 0.5 KiB of garbage and a µs on the request path, seven times over).
 * Errors reach Express's error handling as from a step's own layer: passed to `next`, thrown, or as
 * a rejected promise (or thenable); `next('route')` moves on to the next step, as it does from a
 * `use` layer. Where Express would carry on after a step that throws nothing (`throw undefined`),
 * this reports an error: a step that failed never lets the request go on. Each step runs inside its
 * own try, so a step that throws after an earlier one called `next` is reported once, by itself.
 */
export function inOrder(steps: readonly RequestHandler[]): RequestHandler {
  return function pipeline(req, res, done: NextFunction) {
    let index = 0;
    const next = (err?: unknown): void => {
      if (err && err !== 'route') return done(err);
      const step = steps[index++];
      if (step === undefined) return done();
      try {
        const result: unknown = step(req, res, next);
        if (isThenable(result)) result.then(undefined, (rejection: unknown) => done(rejection || new Error('Rejected promise')));
      } catch (thrown) {
        done(thrown || new Error('Thrown without a reason'));
      }
    };
    next();
  };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}
