import type { PolicyDocument } from './schema.js';

type RateSpec = NonNullable<PolicyDocument['routes'][number]['rate_limit']>;

/** The name of the key's budget shared by every route without a rate of its own, in the RateLimit headers. */
export const DEFAULT_BUDGET = 'default';

/** A rate a key is held to on a route (docs/policy.md, "Rate limits"), with what judging it needs. */
export interface RateLimit {
  /** Which of a key's budgets a request takes from: `default`, or the route's id for a rate of its own. */
  readonly budget: string;
  readonly perSecond: number;
  readonly burst: number;
  /** Milliseconds between two requests at the sustained rate (GCRA's emission interval). */
  readonly intervalMs: number;
  /** The `RateLimit-Policy` header, the same for every answer of the budget. */
  readonly policyHeader: string;
}

/**
 * A rate as the IETF RateLimit header fields state it: a quota `q` per window `w` of whole seconds.
 * The window is the time the burst takes to fill (at least 1 s), and the quota what the rate lets
 * through in it, rounded down, or the burst if more: `r`, the requests that may be sent at once,
 * is never more than `q`, and what `q` per `w` says is never more than the rate unless the burst is.
 */
export function compileRateLimit(budget: string, spec: RateSpec): RateLimit {
  const window = Math.max(1, Math.ceil(spec.burst / spec.per_second - 1e-9));
  const quota = Math.max(spec.burst, Math.floor(spec.per_second * window + 1e-9));
  return {
    budget,
    perSecond: spec.per_second,
    burst: spec.burst,
    intervalMs: 1000 / spec.per_second,
    policyHeader: `"${budget}";q=${quota};w=${window}`,
  };
}
