import type { RateLimit } from '../policy/rate-limit.js';
import { gcra, type Taken } from './gcra.js';
import type { RateLimiter } from './rate-limiter.js';

/** How often, at most, budgets left whole are forgotten (one pass over the map). */
export const SWEEP_EVERY_MS = 10_000;

export interface LocalRateLimiterOptions {
  /** Gateways live now, this one included (InstanceCount): each holds a key to its share of the rate. */
  readonly instances: () => number;
  /** Milliseconds on a monotonic clock. */
  readonly now?: () => number;
}

/**
 * Budgets in this process, with no call out of it: each instance lets a key through at the rate
 * divided by the instances counted, so that a fleet whose load balancer spreads a key's requests
 * evenly lets through the declared rate. A burst is divided too, but never below one request.
 */
export class LocalRateLimiter implements RateLimiter {
  /** TAT by key id and budget; one whose TAT has passed is whole, and is the same as none. */
  readonly #tats = new Map<string, number>();
  readonly #instances: () => number;
  readonly #now: () => number;
  #sweptAt: number;

  constructor({ instances, now = () => performance.now() }: LocalRateLimiterOptions) {
    this.#instances = instances;
    this.#now = now;
    this.#sweptAt = now();
  }

  take(keyId: string, limit: RateLimit): Taken {
    const now = this.#now();
    if (now - this.#sweptAt >= SWEEP_EVERY_MS) this.#sweep(now);
    const instances = Math.max(1, this.#instances());
    const intervalMs = limit.intervalMs * instances;
    // The burst's share, burst / instances, at the instance's interval is the burst's own span of time.
    const toleranceMs = Math.max(limit.burst * limit.intervalMs, intervalMs);
    const id = `${keyId}\u0000${limit.budget}`;
    const { tat, taken } = gcra(this.#tats.get(id) ?? 0, now, intervalMs, toleranceMs, limit.intervalMs);
    if (taken.allowed) this.#tats.set(id, tat);
    // Remaining in the fleet's terms: this instance's share times the instances, as estimated.
    return taken.remaining > limit.burst ? { ...taken, remaining: limit.burst } : taken;
  }

  /** Budgets being held to account now (those not yet whole). */
  get size(): number {
    return this.#tats.size;
  }

  #sweep(now: number): void {
    this.#sweptAt = now;
    for (const [id, tat] of this.#tats) if (tat <= now) this.#tats.delete(id);
  }

  async close(): Promise<void> {}
}
