/**
 * @module
 * The generic cell rate algorithm (GCRA), as a token bucket judged by one number per budget: the
 * theoretical arrival time (TAT) of the next request at the sustained rate. The Redis store runs
 * the same arithmetic in Lua (redis-rate-limiter.ts); docs/policy.md, "Rate limits", explains it.
 */

/** What one request taken from a budget was told. */
export interface Taken {
  readonly allowed: boolean;
  /** Requests that may be sent at once after this one (0 when refused). */
  readonly remaining: number;
  /** Milliseconds until the budget is whole again. */
  readonly resetMs: number;
  /** Refused: milliseconds until a request would be allowed; 0 when allowed. */
  readonly retryAfterMs: number;
}

/**
 * Takes one request from a budget whose TAT is `tat` (0: untouched), at `now`: allowed when the
 * TAT, moved on by one interval, is within `toleranceMs` of now. Returns the new TAT (unchanged
 * when refused) and the verdict; `remaining` counts in `countIntervalMs` (see LocalRateLimiter).
 */
export function gcra(tat: number, now: number, intervalMs: number, toleranceMs: number, countIntervalMs = intervalMs): { readonly tat: number; readonly taken: Taken } {
  const from = Math.max(tat, now);
  const next = from + intervalMs;
  const wait = next - now - toleranceMs;
  if (wait > 0) return { tat, taken: { allowed: false, remaining: 0, resetMs: from - now, retryAfterMs: wait } };
  return { tat: next, taken: { allowed: true, remaining: Math.floor((toleranceMs - (next - now)) / countIntervalMs + 1e-9), resetMs: next - now, retryAfterMs: 0 } };
}
