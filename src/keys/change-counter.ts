/**
 * @module
 * The store's change counter: every `keys update` and `keys disable` increments it in the same
 * script that writes the record, and its notice carries the new value. A gateway compares the
 * counter, read by each health check, with the notices it heard: a counter ahead of them means a
 * notice was lost (pub/sub delivers at most once: a Cluster's bus link down, a subscriber dropped
 * for its output buffer) or is on its way, and everything cached is dropped.
 */

/**
 * Writes the record (KEYS[1]) only if it still holds what was read (ARGV[1]), and then increments
 * the counter (KEYS[2]), returning its new value; nil when the record changed meanwhile. A
 * compare-and-set in one script, where WATCH would be lost if a Cluster sent the transaction on
 * to another node after a failover.
 */
export const CHANGE_RECORD_SCRIPT = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[2])
return redis.call('INCR', KEYS[2])`;

export class ChangeCounter {
  /** The highest value heard, in a notice or read right after subscribing; undefined before either. */
  #heard: number | undefined;

  /** A notice's counter value (none from a command that predates the counter). */
  heard(version: number | undefined): void {
    if (version !== undefined) this.#heard = Math.max(this.#heard ?? 0, version);
  }

  /** Subscribed anew, everything cached dropped: nothing before `version` can be missing any more. */
  subscribedAt(version: number): void {
    this.#heard = Math.max(this.#heard ?? 0, version);
  }

  /** Subscription lost: what is heard starts again from the next baseline. */
  reset(): void {
    this.#heard = undefined;
  }

  /**
   * The counter as read now: true when it is ahead of every notice heard (then it counts as heard,
   * so that one lost notice drops the cache once). Before a baseline, nothing can be judged.
   */
  aheadOfNotices(stored: number): boolean {
    if (this.#heard === undefined || stored <= this.#heard) return false;
    this.#heard = stored;
    return true;
  }
}
