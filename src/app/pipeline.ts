import type { NextFunction, RequestHandler } from 'express';
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
  ];
}

/**
 * Steps as one Express middleware, run in order: given to Express one layer each, the router's path
 * match, prefix trim and closures per layer cost a write about a tenth of its throughput
 * (docs/performance.md, "Written by hand where a library does the job"). Fails closed where Express
 * would carry on: anything a step throws, rejects with or passes to `next` (a falsy value, `'route'`,
 * `'router'` included) stops the request with an Error, and once stopped no later `next()` runs
 * another step. A step's `next()` moves on once; only `next()` with nothing goes on.
 */
export function inOrder(steps: readonly RequestHandler[]): RequestHandler {
  return function pipeline(req, res, done: NextFunction) {
    let over = false;
    const finish = (err?: Error): void => {
      if (over) return;
      over = true;
      done(err);
    };
    const run = (index: number): void => {
      if (over) return;
      const step = steps[index];
      if (step === undefined) return finish();
      let passed = false;
      const next = (verdict?: unknown): void => {
        if (verdict !== undefined) return finish(asError(verdict, step, 'passed', 'to next'));
        if (passed) return;
        passed = true;
        run(index + 1);
      };
      try {
        const result: unknown = step(req, res, next);
        if (isThenable(result)) result.then(undefined, (rejection: unknown) => finish(asError(rejection, step, 'rejected with', '')));
      } catch (thrown) {
        finish(asError(thrown, step, 'threw', ''));
      }
    };
    run(0);
  };
}

/** What a step failed with, as an Error: itself when it is one, else one that names the step and the value. */
function asError(value: unknown, step: RequestHandler, how: string, where: string): Error {
  if (value instanceof Error) return value;
  let text: string;
  try {
    text = String(value);
  } catch {
    text = Object.prototype.toString.call(value); // no toString of its own, or one that throws
  }
  return new Error(`${step.name} ${how} ${text}${where === '' ? '' : ` ${where}`}`);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}
