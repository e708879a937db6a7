/**
 * @module
 * When the key store stopped answering lookups, as far as a resolver can tell: because the store
 * said so (a connection down) or because lookups failed. While it lasts, a cached verdict may stand
 * in for the store for a grace period; a probe of its own finds when it answers again.
 */

export interface StoreOutageOptions {
  readonly now: () => number;
  /** How long cached verdicts stand in for the store once it stopped answering. */
  readonly graceMs: number;
  /** The verdicts' lifetime: a stand-in must have been confirmed within it and the grace together. */
  readonly ttlMs: number;
  readonly probeIntervalMs: number;
  /** One lookup; resolves when the store answered (whatever it said), rejects when it could not. */
  readonly probe: () => Promise<void>;
  /** Told each time the store becomes available or stops being so. */
  readonly onChange: () => void;
}

export class StoreOutage {
  readonly #options: StoreOutageOptions;
  /** Since when the store said it cannot answer lookups; null while it can. */
  #storeDownSince: number | null = null;
  /** Since when lookups have been failing; null after a success. */
  #failingSince: number | null = null;
  /**
   * While lookups fail: a lookup of the resolver's own, on a timer. Only a lookup that succeeds ends
   * a failure that only lookups saw (a command that timed out in a stall, while neither connection
   * dropped), and a gateway its readiness took out of service gets none from traffic.
   */
  #probe: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: StoreOutageOptions) {
    this.#options = options;
  }

  /** When the outage began, or null when the store answers. */
  get start(): number | null {
    if (this.#storeDownSince === null) return this.#failingSince;
    if (this.#failingSince === null) return this.#storeDownSince;
    return Math.min(this.#storeDownSince, this.#failingSince);
  }

  /**
   * The store says whether it can answer. One that says it is back is believed: a gateway taken out
   * of service for failed lookups gets no traffic, so it would never see the lookup that clears them.
   */
  storeSays(available: boolean): void {
    this.#changing(() => {
      if (available) {
        this.#storeDownSince = null;
        this.#failingSince = null;
        this.#stopProbing();
      } else {
        this.#storeDownSince ??= this.#options.now();
      }
    });
  }

  /** A lookup got an answer (a corrupt record included: the store answered). */
  answered(): void {
    if (this.#failingSince === null) return;
    this.#changing(() => {
      this.#failingSince = null;
      this.#stopProbing();
    });
  }

  /** A lookup got no answer: the outage starts now if it had not, and the probe with it. */
  failed(): void {
    this.#changing(() => {
      this.#failingSince ??= this.#options.now();
      if (this.#probe === undefined && !this.#closed) {
        this.#probe = setInterval(() => void this.#options.probe().then(() => this.answered(), () => {}), this.#options.probeIntervalMs);
        this.#probe.unref();
      }
    });
  }

  /**
   * Whether a verdict fetched at `fetchedAt` may answer for the store now: for the grace from the
   * outage's start, and only while Redis confirmed it within the TTL and the grace together. An
   * answer of any age would let a record deleted by hand, or a disable whose notice was never
   * published, come back for the length of any later blip; a silent outage is often first seen by
   * the lookup of an entry that has just expired, which must still stand in.
   */
  standsIn(fetchedAt: number, now: number): boolean {
    const start = this.start ?? now;
    return now - start < this.#options.graceMs && now - fetchedAt < this.#options.ttlMs + this.#options.graceMs;
  }

  /** No more probing; a lookup under way that fails starts none. */
  close(): void {
    this.#closed = true;
    this.#stopProbing();
  }

  #changing(change: () => void): void {
    const before = this.start === null;
    change();
    if (before !== (this.start === null)) this.#options.onChange();
  }

  #stopProbing(): void {
    clearInterval(this.#probe);
    this.#probe = undefined;
  }
}
