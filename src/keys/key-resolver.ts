import { LRUCache } from 'lru-cache';
import {
  DEFAULT_FAILURE_PROBE_INTERVAL_MS,
  DEFAULT_KEY_CACHE_MAX_ENTRIES,
  DEFAULT_KEY_CACHE_TTL_MS,
  DEFAULT_NEGATIVE_CACHE_MAX_ENTRIES,
  DEFAULT_NEGATIVE_CACHE_TTL_MS,
  DEFAULT_OUTAGE_GRACE_MS,
} from '../config/defaults.js';
import { compileAllowlist, type IpAllowlist } from '../net/ip-allowlist.js';
import type { ApiKeyRecord } from './api-key.js';
import { CorruptKeyRecordError, type KeyStore, type KeyStoreEvent } from './key-store.js';

/** A usable key, with what the request path needs precomputed once per fetch. */
export interface ResolvedKey {
  readonly id: string;
  readonly acquirerId: string;
  readonly permissions: ReadonlySet<string>;
  /** null: any address may use the key. */
  readonly allowlist: IpAllowlist | null;
}

export type KeyVerdict =
  | { readonly kind: 'valid'; readonly key: ResolvedKey }
  | { readonly kind: 'unknown' }
  | { readonly kind: 'disabled' };

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
  /** How long a valid key is trusted without asking the store again (change notices usually come first). */
  readonly ttlMs?: number;
  readonly maxEntries?: number;
  /** How long "no such key" is remembered, so a flood of one bad key does not reach the store. */
  readonly negativeTtlMs?: number;
  /** Kept apart from valid keys, so a flood of random keys cannot evict them. */
  readonly negativeMaxEntries?: number;
  /** While the store is unreachable, cached valid keys keep working for this long, then fail closed. */
  readonly outageGraceMs?: number;
  /** Milliseconds on a monotonic clock: a wall clock set back would stretch every TTL and the grace. */
  readonly now?: () => number;
  /** Told where each resolution was answered, for metrics. */
  readonly onResolution?: (layer: 'memory' | 'redis', result: KeyResolutionResult) => void;
  /** Told when the store's health changes (as far as this resolver can tell), for readiness and metrics. */
  readonly onStoreHealth?: (healthy: boolean) => void;
  /** While lookups fail, one of the resolver's own this often (DEFAULT_FAILURE_PROBE_INTERVAL_MS). */
  readonly failureProbeIntervalMs?: number;
}

export type KeyResolutionResult = 'hit' | 'negative_hit' | 'coalesced' | 'miss' | 'error';

type CachedVerdict = { readonly verdict: KeyVerdict; readonly fetchedAt: number };

const UNKNOWN: KeyVerdict = Object.freeze({ kind: 'unknown' });
const DISABLED: KeyVerdict = Object.freeze({ kind: 'disabled' });

function toVerdict(record: ApiKeyRecord | null): KeyVerdict {
  if (record === null) return UNKNOWN;
  if (record.disabled_at !== null) return DISABLED;
  return {
    kind: 'valid',
    key: {
      id: record.id,
      acquirerId: record.acquirer_id,
      permissions: new Set(record.permissions),
      allowlist: record.allowed_ips.length === 0 ? null : compileAllowlist(record.allowed_ips),
    },
  };
}

/**
 * The in-process cache in front of a KeyStore. A hit costs no store round trip. Concurrent misses
 * for one key share a single lookup. Change notices evict at once; a store that reconnected its
 * notices drops everything but disabled verdicts, which stay until evicted: a key is never re-enabled.
 */
export class KeyResolver {
  readonly #store: KeyStore;
  readonly #ttlMs: number;
  readonly #negativeTtlMs: number;
  readonly #outageGraceMs: number;
  readonly #now: () => number;
  readonly #onResolution: NonNullable<KeyResolverOptions['onResolution']>;
  readonly #onStoreHealth: NonNullable<KeyResolverOptions['onStoreHealth']>;
  readonly #known: LRUCache<string, CachedVerdict>;
  readonly #unknown: LRUCache<string, number>;
  readonly #inFlight = new Map<string, Promise<KeyVerdict>>();
  readonly #unwatch: () => void;
  /** Bumped on every eviction, so a lookup that started before a change cannot re-cache the old record. */
  #generation = 0;
  /** Since when the store said it cannot answer or notify; null while healthy. */
  #storeDownSince: number | null = null;
  /** Since when lookups have been failing; null after a success. */
  #failingSince: number | null = null;
  readonly #failureProbeIntervalMs: number;
  /**
   * While lookups fail: a lookup of the resolver's own, on a timer. Only a lookup that succeeds ends
   * a failure that only lookups saw (a command that timed out in a stall, while neither connection
   * dropped), and a gateway its readiness took out of service gets none from traffic.
   */
  #failureProbe: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(store: KeyStore, options: KeyResolverOptions = {}) {
    this.#store = store;
    this.#ttlMs = options.ttlMs ?? DEFAULT_KEY_CACHE_TTL_MS;
    this.#negativeTtlMs = options.negativeTtlMs ?? DEFAULT_NEGATIVE_CACHE_TTL_MS;
    this.#outageGraceMs = options.outageGraceMs ?? DEFAULT_OUTAGE_GRACE_MS;
    this.#now = options.now ?? (() => performance.now());
    this.#onResolution = options.onResolution ?? (() => {});
    this.#onStoreHealth = options.onStoreHealth ?? (() => {});
    this.#failureProbeIntervalMs = options.failureProbeIntervalMs ?? DEFAULT_FAILURE_PROBE_INTERVAL_MS;
    this.#known = new LRUCache({ max: options.maxEntries ?? DEFAULT_KEY_CACHE_MAX_ENTRIES });
    this.#unknown = new LRUCache({ max: options.negativeMaxEntries ?? DEFAULT_NEGATIVE_CACHE_MAX_ENTRIES });
    this.#unwatch = store.watch((event) => this.#onStoreEvent(event));
  }

  /** Resolves a key by its hash. Rejects with KeyStoreUnavailableError rather than guess. */
  resolve(keyHash: string): Promise<KeyVerdict> {
    const remembered = this.fromMemory(keyHash);
    return remembered !== undefined ? Promise.resolve(remembered) : this.#lookup(keyHash, this.#known.get(keyHash));
  }

  /**
   * The verdict memory may give on its own, or undefined when the store must be asked (`resolve`).
   * Synchronous, so the request path pays no promise for a cached key.
   */
  fromMemory(keyHash: string): KeyVerdict | undefined {
    const now = this.#now();
    const cached = this.#known.get(keyHash);
    if (cached !== undefined) {
      if (cached.verdict.kind === 'disabled') {
        this.#onResolution('memory', 'hit');
        return cached.verdict;
      }
      const outageStart = this.#outageStart();
      const trusted = outageStart === null ? now - cached.fetchedAt < this.#ttlMs : this.#standsIn(cached, now, outageStart);
      if (trusted) {
        this.#onResolution('memory', 'hit');
        return cached.verdict;
      }
      // Expired, or an outage outlived the grace period (a disable may have been missed): ask again.
    }
    const unknownAt = this.#unknown.get(keyHash);
    if (unknownAt !== undefined && now - unknownAt < this.#negativeTtlMs) {
      this.#onResolution('memory', 'negative_hit');
      return UNKNOWN;
    }
    return undefined;
  }

  /** Whether the store is currently answering and notifying; for readiness. */
  get storeAvailable(): boolean {
    return this.#outageStart() === null;
  }

  #setFailing(failing: boolean): void {
    const before = this.storeAvailable;
    if (failing) this.#failingSince ??= this.#now();
    else this.#failingSince = null;
    if (failing && this.#failureProbe === undefined && !this.#closed) {
      this.#failureProbe = setInterval(() => void this.#probe(), this.#failureProbeIntervalMs);
      this.#failureProbe.unref();
    } else if (!failing) {
      this.#stopProbing();
    }
    if (this.storeAvailable !== before) this.#onStoreHealth(this.storeAvailable);
  }

  async #probe(): Promise<void> {
    try {
      await this.#store.findByHash(PROBE_HASH);
    } catch (err) {
      if (!(err instanceof CorruptKeyRecordError)) return; // still failing: the next tick asks again
    }
    if (this.#failingSince !== null) this.#setFailing(false);
  }

  #stopProbing(): void {
    clearInterval(this.#failureProbe);
    this.#failureProbe = undefined;
  }

  /** Stops listening to the store, and probing it: a lookup still under way that fails starts nothing. */
  close(): void {
    this.#closed = true;
    this.#unwatch();
    this.#stopProbing();
  }

  /**
   * Whether a cached valid verdict may answer for the store during an outage: for the grace from the
   * outage's start, and only while Redis confirmed it within the TTL and the grace together. An
   * answer of any age would let a record deleted by hand, or a disable whose notice was never
   * published, come back for the length of any later blip; a silent outage is often first seen by
   * the lookup of an entry that has just expired, which must still stand in.
   */
  #standsIn(cached: CachedVerdict, now: number, outageStart: number): boolean {
    return now - outageStart < this.#outageGraceMs && now - cached.fetchedAt < this.#ttlMs + this.#outageGraceMs;
  }

  #outageStart(): number | null {
    if (this.#storeDownSince === null) return this.#failingSince;
    if (this.#failingSince === null) return this.#storeDownSince;
    return Math.min(this.#storeDownSince, this.#failingSince);
  }

  #lookup(keyHash: string, stale: CachedVerdict | undefined): Promise<KeyVerdict> {
    const pending = this.#inFlight.get(keyHash);
    if (pending !== undefined) {
      this.#onResolution('memory', 'coalesced');
      return pending;
    }
    const generation = this.#generation;
    const lookup = this.#store.findByHash(keyHash).then(
      (record) => {
        this.#setFailing(false);
        this.#onResolution('redis', record === null ? 'miss' : 'hit');
        const verdict = toVerdict(record);
        if (generation === this.#generation) this.#remember(keyHash, verdict);
        return verdict;
      },
      (err: unknown) => {
        if (err instanceof CorruptKeyRecordError) {
          // The store answered: only this record cannot be read, and only its key is refused. Taken
          // as an outage, it would leave the gateway not ready until some other lookup succeeded,
          // and a balancer that drains on readiness sends none.
          this.#setFailing(false);
          this.#onResolution('redis', 'error');
          throw new KeyStoreUnavailableError(err);
        }
        const now = this.#now();
        this.#setFailing(true);
        this.#onResolution('redis', 'error');
        const outageStart = this.#outageStart() ?? now;
        // An expired entry may stand in briefly: a blip in Redis must not log every client out.
        if (stale !== undefined && this.#standsIn(stale, now, outageStart)) return stale.verdict;
        throw new KeyStoreUnavailableError(err);
      },
    );
    const settled = lookup.finally(() => {
      if (this.#inFlight.get(keyHash) === settled) this.#inFlight.delete(keyHash);
    });
    this.#inFlight.set(keyHash, settled);
    return settled;
  }

  #remember(keyHash: string, verdict: KeyVerdict): void {
    if (verdict.kind === 'unknown') {
      // A record removed from the store (by hand, a flush, an eviction) is gone here too: left in
      // place, the old verdict would stand in for the store during the next outage.
      this.#known.delete(keyHash);
      this.#unknown.set(keyHash, this.#now());
    } else {
      this.#unknown.delete(keyHash);
      this.#known.set(keyHash, { verdict, fetchedAt: this.#now() });
    }
  }

  #onStoreEvent(event: KeyStoreEvent): void {
    switch (event.type) {
      case 'changed':
        // A lookup already under way may have read the old record: later requests must not share it.
        this.#generation++;
        // A disabled verdict stays, as on a resync: no change re-enables a key, and a store that lost
        // the disable (an older snapshot) must not be asked whether it still holds.
        if (this.#known.peek(event.keyHash)?.verdict.kind !== 'disabled') this.#known.delete(event.keyHash);
        this.#unknown.delete(event.keyHash);
        this.#inFlight.delete(event.keyHash);
        break;
      case 'resync': {
        this.#generation++;
        // Notices may have been missed: every verdict is asked again, but a disabled one. A key is
        // never re-enabled, so it cannot be stale, and a store that lost the disable (a Redis that
        // restarted from an older snapshot) must not bring the key back here.
        const stale: string[] = [];
        for (const [keyHash, cached] of this.#known.entries()) if (cached.verdict.kind !== 'disabled') stale.push(keyHash);
        for (const keyHash of stale) this.#known.delete(keyHash);
        this.#unknown.clear();
        this.#inFlight.clear();
        break;
      }
      case 'health': {
        const before = this.storeAvailable;
        // A store that says it is back is believed: a gateway taken out of service for failed lookups
        // gets no traffic, so it would never see the successful lookup that clears the failure.
        if (event.healthy) {
          this.#storeDownSince = null;
          this.#failingSince = null;
          this.#stopProbing();
        } else {
          this.#storeDownSince ??= this.#now();
        }
        if (this.storeAvailable !== before || !event.healthy) this.#onStoreHealth(this.storeAvailable);
        break;
      }
    }
  }
}
