import type { NextFunction, RequestHandler, Response } from 'express';
import { GatewayError } from '../../errors/gateway-error.js';
import type { Taken } from '../../limits/gcra.js';
import { allowedHeaders, refusedHeaders } from '../../limits/rate-limit-headers.js';
import type { RateLimiter } from '../../limits/rate-limiter.js';
import type { RateLimit } from '../../policy/rate-limit.js';

export interface RateLimitDeps {
  /** Where budgets are kept (limits/rate-limits.ts); absent: no rate is judged (an app built without one). */
  readonly rateLimiter?: RateLimiter | undefined;
  /** RATE_LIMIT_FAIL=closed: a request whose budget Redis could not be asked about is refused (503), not let through. */
  readonly rateLimitFailClosed?: boolean | undefined;
}

/**
 * Step 6: the key's rate on this route (the policy's `rate_limit`, or its `rate_limits.default`),
 * once the head has been judged whole, so that an unknown key, an address outside the whitelist
 * or a malformed request takes nothing from a key's budget; before the body is read and anything
 * goes upstream. Over it: 429 with Retry-After and the RateLimit fields.
 */
export function createRateLimit({ rateLimiter, rateLimitFailClosed = false }: RateLimitDeps): RequestHandler {
  return function rateLimit(_req, res, next) {
    const limit = res.locals.route!.rateLimit;
    if (limit === undefined || rateLimiter === undefined) return next();
    const taken = rateLimiter.take(res.locals.key!.id, limit);
    if (!(taken instanceof Promise)) return judge(taken, limit, res, next);
    taken.then((answer) => {
      // Redis did not answer: let it through (RATE_LIMIT_FAIL=open, counted by the store), or refuse.
      if (answer !== 'unavailable') judge(answer, limit, res, next);
      else if (rateLimitFailClosed) next(new GatewayError('RATE_LIMIT_UNAVAILABLE'));
      else next();
    }, next);
  };
}

function judge(taken: Taken, limit: RateLimit, res: Response, next: NextFunction): void {
  if (!taken.allowed) return next(new GatewayError('RATE_LIMITED', { headers: refusedHeaders(limit, taken) }));
  // Added to the answer when it is written (the proxied one, the catalogue), not set on `res` now:
  // a header set early puts every proxied answer on Node's slower writeHead path.
  res.locals.rateLimitHeaders = allowedHeaders(limit, taken);
  next();
}
