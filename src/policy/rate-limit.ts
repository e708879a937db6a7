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
 * A rate as the IETF RateLimit header fields state it: a quota `q` per window `w` of whole seconds,
 * the sustained rate rounded down (one second, or the fewest seconds in which one request is
 * allowed). The burst shows in `RateLimit`'s `r`, the requests that may be sent at once.
 */
export function compileRateLimit(budget: string, spec: RateSpec): RateLimit {
  const window = spec.per_second >= 1 ? 1 : Math.ceil(1 / spec.per_second);
  const quota = Math.floor(spec.per_second * window + 1e-9);
  return {
    budget,
    perSecond: spec.per_second,
    burst: spec.burst,
    intervalMs: 1000 / spec.per_second,
    policyHeader: `"${budget}";q=${quota};w=${window}`,
  };
}
