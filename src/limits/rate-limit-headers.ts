import type { RateLimit } from '../policy/rate-limit.js';
import type { Taken } from './gcra.js';

/** Whole seconds, rounded up, as delay-seconds (RFC 9110 §10.2.3) and the RateLimit fields take them. */
const seconds = (ms: number): number => Math.ceil(ms / 1000 - 1e-9);

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) of an answer the budget allowed:
 * the policy, the requests that may be sent at once now (`r`), and `t`: with some left, the seconds
 * until the budget is whole again; with none, until the next request is allowed, as a 429 would say.
 */
export function allowedHeaders(limit: RateLimit, taken: Taken): Record<string, string> {
  const t = seconds(taken.remaining > 0 ? taken.resetMs : taken.retryAfterMs);
  return { ratelimit: `"${limit.budget}";r=${taken.remaining};t=${t}`, 'ratelimit-policy': limit.policyHeader };
}

/** A 429's: `Retry-After` when the next request would be allowed, and `RateLimit`'s `t` the same moment, as the draft asks. */
export function refusedHeaders(limit: RateLimit, taken: Taken): Record<string, string> {
  const wait = String(Math.max(1, seconds(taken.retryAfterMs)));
  return { 'retry-after': wait, ratelimit: `"${limit.budget}";r=0;t=${wait}`, 'ratelimit-policy': limit.policyHeader };
}
