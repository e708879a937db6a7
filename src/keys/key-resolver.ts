import { LRUCache } from 'lru-cache';
import {
  DEFAULT_FAILURE_PROBE_INTERVAL_MS,
  DEFAULT_KEY_CACHE_MAX_ENTRIES,
  DEFAULT_KEY_CACHE_TTL_MS,
  DEFAULT_NEGATIVE_CACHE_MAX_ENTRIES,
  DEFAULT_OUTAGE_GRACE_MS,
  NOTICELESS_TRUST_MS,
} from '../config/defaults.js';
import { CorruptKeyRecordError, type KeyStore, type KeyStoreEvent } from './key-store.js';
import { KeyHashing } from './key-hash.js';
import { DISABLED, toVerdict, UNKNOWN, type KeyVerdict } from './key-verdict.js';
import { StoreOutage } from './store-outage.js';

export type { KeyVerdict, ResolvedKey } from './key-verdict.js';

/** The store could not answer and nothing cached may stand in for it. */
export class KeyStoreUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('key store unavailable', { cause });
    this.name = 'KeyStoreUnavailableError';
  }
}

/** The hash the probe asks for: shaped like a key's, and no key's (nothing hashes to it). */
const PROBE_HASH = '0'.repeat(64);

export interface KeyResolverOptions {
  /**
   * How long any verdict (valid, disabled, unknown) is trusted without asking the store again, while
   * change notices are live (they usually come first). One lifetime, so no verdict ages differently.
   */
  readonly ttlMs?: number;
  readonly maxEntries?: number;
  /** Without change notices, how long a verdict is trusted (NOTICELESS_TRUST_MS); at most ttlMs. */
  readonly noticelessTrustMs?: number;
  /** "No such key" is kept apart from known keys, so a flood of random keys cannot evict them. */
  readonly negativeMaxEntries?: number;
  /** While the store is unreachable, cached valid keys keep working for this long, then fail closed. */
  readonly outageGraceMs?: number;
  /** Milliseconds on a monotonic clock: a wall clock set back would stretch every TTL and the grace. */
  readonly now?: () => number;
  /** Told where each resolution was answered, for metrics. */
  readonly onResolution?: (layer: 'memory' | 'redis', result: KeyResolutionResult) => void;
  /** Told when the store's health changes (as far as this resolver can tell), for readiness and metrics. */
  readonly onStoreHealth?: (health: StoreHealth) => void;
  /** While lookups fail, one of the resolver's own this often (DEFAULT_FAILURE_PROBE_INTERVAL_MS). */
  readonly failureProbeIntervalMs?: number;
  /**
   * KEY_HASH_PEPPER: verdicts are cached by the peppered hash, and a change notice naming either
   * form of a key's hash drops its verdict (key-hash.ts).
   */
  readonly pepper?: string | undefined;
}

export type KeyResolutionResult = 'hit' | 'negative_hit' | 'coalesced' | 'miss' | 'error';

/** `available`: lookups are answered; `notices`: change notices arrive too. */
export interface StoreHealth {
  readonly available: boolean;
  readonly notices: boolean;
}

type CachedVerdict = { readonly verdict: KeyVerdict; readonly fetchedAt: number };

/**
 * The in-process cache in front of a KeyStore. A hit costs no store round trip. Concurrent misses
 * for one key share a single lookup. Every verdict lives as long (ttlMs, or NOTICELESS_TRUST_MS while
 * change notices are down); change notices evict at once. A key seen disabled is remembered apart,
 * so a store that loses the disable (an older snapshot) cannot bring it back here.
 */
export class KeyResolver {
  readonly #store: KeyStore;
  readonly #ttlMs: number;
  readonly #noticelessTrustMs: number;
  readonly #now: () => number;
  readonly #onResolution: NonNullable<KeyResolverOptions['onResolution']>;
  #onStoreHealth: NonNullable<KeyResolverOptions['onStoreHealth']> = () => {};
  readonly #known: LRUCache<string, CachedVerdict>;
  readonly #unknown: LRUCache<string, number>;
  /** Hashes of keys seen disabled: consulted after every lookup, so it costs every class the same. */
  readonly #disabled: LRUCache<string, true>;
  readonly #inFlight = new Map<string, Promise<KeyVerdict>>();
  readonly #unwatch: () => void;
  /** Bumped on every eviction, so a lookup that started before a change cannot re-cache the old record. */
  #generation = 0;
  readonly #outage: StoreOutage;
  /** Whether change notices arrive (the store says so); without them verdicts are trusted briefly. */
  #notices = false;
  #reported: StoreHealth | undefined;
  readonly #hashing: KeyHashing;

  constructor(store: KeyStore, options: KeyResolverOptions = {}) {
    this.#store = store;
    this.#hashing = new KeyHashing(options.pepper);
    this.#ttlMs = options.ttlMs ?? DEFAULT_KEY_CACHE_TTL_MS;
    this.#noticelessTrustMs = Math.min(this.#ttlMs, options.noticelessTrustMs ?? NOTICELESS_TRUST_MS);
    this.#now = options.now ?? (() => performance.now());
    this.#onResolution = options.onResolution ?? (() => {});
    this.#outage = new StoreOutage({
      now: this.#now,
      graceMs: options.outageGraceMs ?? DEFAULT_OUTAGE_GRACE_MS,
      ttlMs: this.#ttlMs,
      probeIntervalMs: options.failureProbeIntervalMs ?? DEFAULT_FAILURE_PROBE_INTERVAL_MS,
      probe: () => store.findByHash(PROBE_HASH).then(() => {}, (err: unknown) => {
        if (!(err instanceof CorruptKeyRecordError)) throw err; // a corrupt record: the store answered
      }),
      onChange: () => this.#reportHealth(),
    });
    const max = options.maxEntries ?? DEFAULT_KEY_CACHE_MAX_ENTRIES;
    this.#known = new LRUCache({ max });
    this.#unknown = new LRUCache({ max: options.negativeMaxEntries ?? DEFAULT_NEGATIVE_CACHE_MAX_ENTRIES });
    this.#disabled = new LRUCache({ max: max * 10 });
    this.#unwatch = store.watch((event) => this.#onStoreEvent(event));
    // Told of changes only: the store's health as of now (given by watch) is the caller's to read.
    this.#onStoreHealth = options.onStoreHealth ?? (() => {});
  }

  /** Resolves a key by its (plain) hash. Rejects with KeyStoreUnavailableError rather than guess. */
  resolve(keyHash: string): Promise<KeyVerdict> {
    const remembered = this.fromMemory(keyHash);
    const cacheKey = this.#hashing.stored(keyHash);
    return remembered !== undefined ? Promise.resolve(remembered) : this.#lookup(keyHash, cacheKey, this.#cached(cacheKey));
  }

  /**
   * The verdict memory may give on its own, or undefined when the store must be asked (`resolve`).
   * Synchronous, so the request path pays no promise for a cached key.
   */
  fromMemory(keyHash: string): KeyVerdict | undefined {
    const cached = this.#cached(this.#hashing.stored(keyHash));
    if (cached === undefined) return undefined;
    const now = this.#now();
    const trusted = this.#outage.start === null ? now - cached.fetchedAt < this.#trustMs() : this.#outage.standsIn(cached.fetchedAt, now);
    if (!trusted) return undefined; // expired, or an outage outlived the grace (a disable may have been missed)
    this.#onResolution('memory', cached.verdict === UNKNOWN ? 'negative_hit' : 'hit');
    return cached.verdict;
  }

  #cached(keyHash: string): CachedVerdict | undefined {
    const known = this.#known.get(keyHash);
    if (known !== undefined) return known;
    const unknownAt = this.#unknown.get(keyHash);
    return unknownAt === undefined ? undefined : { verdict: UNKNOWN, fetchedAt: unknownAt };
  }

  #trustMs(): number {
    return this.#notices ? this.#ttlMs : this.#noticelessTrustMs;
  }

  /** Whether the store is currently answering lookups; for readiness. */
  get storeAvailable(): boolean {
    return this.#outage.start === null;
  }

  /** Whether change notices arrive; without them, verdicts are trusted for NOTICELESS_TRUST_MS only. */
  get changeNotices(): boolean {
    return this.#notices;
  }

  /** Tells onStoreHealth of a change since it was last told (or since the store's first word). */
  #reportHealth(): void {
    const now = { available: this.storeAvailable, notices: this.#notices };
    if (this.#reported !== undefined && now.available === this.#reported.available && now.notices === this.#reported.notices) return;
    this.#reported = now;
    this.#onStoreHealth(now);
  }

  /** Stops listening to the store, and probing it: a lookup still under way that fails starts nothing. */
  close(): void {
    this.#unwatch();
    this.#outage.close();
  }

  /** `keyHash`: what the store is asked for; `cacheKey`: what the verdict is kept by (the stored form). */
  #lookup(keyHash: string, cacheKey: string, stale: CachedVerdict | undefined): Promise<KeyVerdict> {
    const pending = this.#inFlight.get(cacheKey);
    if (pending !== undefined) {
      this.#onResolution('memory', 'coalesced');
      return pending;
    }
    const generation = this.#generation;
    const lookup = this.#store.findByHash(keyHash).then(
      (record) => {
        this.#outage.answered();
        this.#onResolution('redis', record === null ? 'miss' : 'hit');
        let verdict = toVerdict(record);
        // Seen disabled once, disabled for good: the lookup is made all the same, for every class.
        if (this.#disabled.get(cacheKey) !== undefined && record !== null) verdict = DISABLED;
        if (generation === this.#generation) this.#remember(cacheKey, verdict);
        return verdict;
      },
      (err: unknown) => {
        if (err instanceof CorruptKeyRecordError) {
          // The store answered: only this record cannot be read, and only its key is refused. Taken
          // as an outage, it would leave the gateway not ready until some other lookup succeeded,
          // and a balancer that drains on readiness sends none.
          this.#outage.answered();
          this.#onResolution('redis', 'error');
          throw new KeyStoreUnavailableError(err);
        }
        this.#outage.failed();
        this.#onResolution('redis', 'error');
        // An expired entry may stand in briefly: a blip in Redis must not log every client out.
        if (stale !== undefined && this.#outage.standsIn(stale.fetchedAt, this.#now())) return stale.verdict;
        throw new KeyStoreUnavailableError(err);
      },
    );
    const settled = lookup.finally(() => {
      if (this.#inFlight.get(cacheKey) === settled) this.#inFlight.delete(cacheKey);
    });
    this.#inFlight.set(cacheKey, settled);
    return settled;
  }

  #remember(keyHash: string, verdict: KeyVerdict): void {
    if (verdict === UNKNOWN) {
      // A record removed from the store (by hand, a flush, an eviction) is gone here too: left in
      // place, the old verdict would stand in for the store during the next outage.
      this.#known.delete(keyHash);
      this.#unknown.set(keyHash, this.#now());
      return;
    }
    if (verdict === DISABLED) this.#disabled.set(keyHash, true);
    this.#unknown.delete(keyHash);
    this.#known.set(keyHash, { verdict, fetchedAt: this.#now() });
  }

  #forget(keyHash: string): void {
    this.#known.delete(keyHash);
    this.#unknown.delete(keyHash);
    this.#inFlight.delete(keyHash);
  }

  #onStoreEvent(event: KeyStoreEvent): void {
    switch (event.type) {
      case 'changed':
        // A lookup already under way may have read the old record: later requests must not share it.
        this.#generation++;
        for (const cacheKey of this.#hashing.affected(event.keyHash)) this.#forget(cacheKey);
        break;
      case 'resync':
        // Notices may have been missed: every verdict is asked again.
        this.#generation++;
        this.#known.clear();
        this.#unknown.clear();
        this.#inFlight.clear();
        break;
      case 'health': {
        this.#notices = event.notices;
        this.#outage.storeSays(event.available);
        this.#reportHealth();
        break;
      }
    }
  }
}
