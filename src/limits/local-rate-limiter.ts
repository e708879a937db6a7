import type { RateLimit } from '../policy/rate-limit.js';
import { gcra, type Taken } from './gcra.js';
import type { RateLimiter } from './rate-limiter.js';

/** Budgets looked at for being whole again on each take: at least as many as a take can add (one). */
const SWEEP_STEPS = 2;

export interface LocalRateLimiterOptions {
  /** Gateways live now, this one included (InstanceCount): each holds a key to its share of the rate. */
  readonly instances: () => number;
  /** Milliseconds on a monotonic clock. */
  readonly now?: () => number;
}

/**
 * Budgets in this process, with no call out of it: each instance lets a key through at the rate
 * divided by the instances counted, so that a fleet whose load balancer spreads a key's requests
 * evenly lets through the declared rate. A burst is divided too, but never below one request. What
 * it tells a client (`remaining`, the waits) is this instance's share: a client on one keep-alive
 * connection meets only this instance.
 */
export class LocalRateLimiter implements RateLimiter {
  /** TAT by key id and budget; one whose TAT has passed is whole, and is the same as none. */
  readonly #tats = new Map<string, number>();
  /** Where the sweep goes on: a Map's iterator survives entries deleted and added behind it. */
  #sweep: MapIterator<[string, number]> = this.#tats.entries();
  readonly #instances: () => number;
  readonly #now: () => number;

  constructor({ instances, now = () => performance.now() }: LocalRateLimiterOptions) {
    this.#instances = instances;
    this.#now = now;
  }

  take(keyId: string, limit: RateLimit): Taken {
    const now = this.#now();
    this.#forgetWhole(now);
    const instances = Math.max(1, this.#instances());
    const intervalMs = limit.intervalMs * instances;
    // The burst's share, burst / instances, at the instance's interval is the burst's own span of time.
    const toleranceMs = Math.max(limit.burst * limit.intervalMs, intervalMs);
    const id = `${keyId}\u0000${limit.budget}`;
    const stored = this.#tats.get(id) ?? 0;
    const { tat, taken } = gcra(stored, now, intervalMs, toleranceMs);
    if (tat !== stored) this.#tats.set(id, tat);
    return taken;
  }

  /** Budgets being held to account now (those not yet found whole). */
  get size(): number {
    return this.#tats.size;
  }

  /**
   * Forgets a few budgets that are whole again, going round the map a few entries per take: never a
   * pass over all of it on one request's path, and never fewer forgotten than taken.
   */
  #forgetWhole(now: number): void {
    for (let step = 0; step < SWEEP_STEPS; step++) {
      let next = this.#sweep.next();
      if (next.done === true) {
        this.#sweep = this.#tats.entries();
        next = this.#sweep.next();
        if (next.done === true) return;
      }
      const [id, tat] = next.value;
      if (tat <= now) this.#tats.delete(id);
    }
  }

  async close(): Promise<void> {}
}
