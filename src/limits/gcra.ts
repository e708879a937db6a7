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
  /** Milliseconds until one more request would be allowed: 0 while some remain. */
  readonly retryAfterMs: number;
}

/** A wait shorter than this is none: float arithmetic must not refuse a burst's last request. */
export const GCRA_EPSILON_MS = 1e-6;

/**
 * Takes one request from a budget whose TAT is `tat` (0: untouched), at `now`: allowed when the
 * TAT, moved on by one interval, is within `toleranceMs` of now. A TAT further ahead than the
 * tolerance (a budget used under a slower rate, before a reload) counts as exactly empty, so a
 * looser rate applies from the next request, and is kept so (the new TAT, as cut, is returned
 * when refused too). Returns the new TAT.
 */
export function gcra(tat: number, now: number, intervalMs: number, toleranceMs: number): { readonly tat: number; readonly taken: Taken } {
  const from = Math.min(Math.max(tat, now), now + toleranceMs);
  const next = from + intervalMs;
  const wait = next - now - toleranceMs;
  if (wait > GCRA_EPSILON_MS) return { tat: from, taken: { allowed: false, remaining: 0, resetMs: from - now, retryAfterMs: wait } };
  return { tat: next, taken: allowedAt(next - now, intervalMs, toleranceMs) };
}

/** An allowed request's verdict, the budget whole again in `resetMs`; shared with the Redis store's reply. */
export function allowedAt(resetMs: number, intervalMs: number, toleranceMs: number): Taken {
  const remaining = Math.max(0, Math.floor((toleranceMs - resetMs) / intervalMs + GCRA_EPSILON_MS));
  // None left: the next request waits until the TAT is one interval within the tolerance.
  const retryAfterMs = remaining > 0 ? 0 : Math.max(0, resetMs + intervalMs - toleranceMs);
  return { allowed: true, remaining, resetMs, retryAfterMs };
}
