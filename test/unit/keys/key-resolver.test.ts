import { jest } from '@jest/globals';
import { generateKey, hashKey, type ApiKeyRecord } from '../../../src/keys/api-key.js';
import { KeyResolver, KeyStoreUnavailableError } from '../../../src/keys/key-resolver.js';
import { CorruptKeyRecordError, type KeyStoreEvent } from '../../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { parseAddress } from '../../../src/net/ip-allowlist.js';
import { newRecord } from '../../helpers/key-store-contract.js';
import { waitFor } from '../../helpers/wait.js';

/** A MemoryKeyStore that counts lookups, can fail them, and lets a test emit store events. */
class ScriptedStore extends MemoryKeyStore {
  lookups = 0;
  failing = false;
  corrupt = false;
  /** Hashes whose records are gone from the store (deleted by hand, flushed, evicted). */
  readonly removed = new Set<string>();
  gate: Promise<void> | undefined;
  readonly #listeners = new Set<(e: KeyStoreEvent) => void>();

  override async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    this.lookups++;
    if (this.gate) await this.gate;
    if (this.failing) throw new Error('redis down');
    if (this.corrupt) throw new CorruptKeyRecordError('key record is not JSON');
    if (this.removed.has(keyHash)) return null;
    return super.findByHash(keyHash);
  }

  override watch(listener: (e: KeyStoreEvent) => void): () => void {
    this.#listeners.add(listener);
    const inner = super.watch(listener);
    return () => {
      this.#listeners.delete(listener);
      inner();
    };
  }

  emit(event: KeyStoreEvent): void {
    for (const l of this.#listeners) l(event);
  }
}

function setup(options: ConstructorParameters<typeof KeyResolver>[1] = {}) {
  const store = new ScriptedStore();
  let now = 1_000_000;
  const clock = { advance: (ms: number) => (now += ms) };
  const resolver = new KeyResolver(store, { ttlMs: 60_000, outageGraceMs: 30_000, ...options, now: () => now });
  return { store, resolver, clock };
}

describe('KeyResolver', () => {
  it('resolves a valid key with its permissions and compiled whitelist', async () => {
    const { store, resolver } = setup();
    const record = newRecord({ allowed_ips: ['192.0.2.0/24'] });
    await store.create(record);
    const verdict = await resolver.resolve(record.key_hash);
    expect(verdict.kind).toBe('valid');
    if (verdict.kind !== 'valid') return;
    expect(verdict.key).toMatchObject({ id: record.id, acquirerId: 'acq_1' });
    expect([...verdict.key.permissions]).toEqual(['eod_list', 'eod_read']);
    expect(verdict.key.allowlist?.contains(parseAddress('192.0.2.9')!)).toBe(true);
    expect(verdict.key.allowlist?.contains(parseAddress('198.51.100.1')!)).toBe(false);
  });

  it('answers from memory only what memory may answer, and never asks the store for it', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    const unknown = hashKey(generateKey());
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    expect(resolver.fromMemory(unknown)).toBeUndefined();
    expect(store.lookups).toBe(0);
    await resolver.resolve(record.key_hash);
    await resolver.resolve(unknown);
    expect(resolver.fromMemory(record.key_hash)).toMatchObject({ kind: 'valid', key: { id: record.id } });
    expect(resolver.fromMemory(unknown)).toEqual({ kind: 'unknown' });
    clock.advance(60_000);
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined(); // expired: only the store may say
    expect(resolver.fromMemory(unknown)).toBeUndefined();
    expect(store.lookups).toBe(2);
  });

  it('serves a cached key with no store round trip until the TTL passes', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    for (let i = 0; i < 100; i++) await resolver.resolve(record.key_hash);
    expect(store.lookups).toBe(1);
    clock.advance(60_000);
    await resolver.resolve(record.key_hash);
    expect(store.lookups).toBe(2);
  });

  it('remembers unknown keys as long as any verdict, and shares one lookup between concurrent misses', async () => {
    const { store, resolver, clock } = setup();
    const hash = hashKey(generateKey());
    const results = await Promise.all(Array.from({ length: 50 }, () => resolver.resolve(hash)));
    expect(results.every((r) => r.kind === 'unknown')).toBe(true);
    expect(store.lookups).toBe(1);
    for (let i = 0; i < 1000; i++) await resolver.resolve(hash);
    expect(store.lookups).toBe(1);
    clock.advance(59_999);
    await resolver.resolve(hash);
    expect(store.lookups).toBe(1);
    clock.advance(1);
    await resolver.resolve(hash);
    expect(store.lookups).toBe(2);
  });

  it('keeps unknown keys from evicting valid ones', async () => {
    const { store, resolver } = setup({ maxEntries: 10, negativeMaxEntries: 10 });
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    for (let i = 0; i < 100; i++) await resolver.resolve(hashKey(generateKey()));
    const before = store.lookups;
    await resolver.resolve(record.key_hash);
    expect(store.lookups).toBe(before);
  });

  it('gives every verdict one lifetime: valid, disabled and unknown are each asked again at the TTL, not before', async () => {
    const { store, resolver, clock } = setup();
    const valid = newRecord();
    const disabled = newRecord();
    await store.create(valid);
    await store.create(disabled);
    await store.disable(disabled.id, new Date());
    const unknown = hashKey(generateKey());
    const hashes = [valid.key_hash, disabled.key_hash, unknown];
    expect((await Promise.all(hashes.map((h) => resolver.resolve(h)))).map((v) => v.kind)).toEqual(['valid', 'disabled', 'unknown']);
    clock.advance(59_999);
    expect(hashes.map((h) => resolver.fromMemory(h)?.kind)).toEqual(['valid', 'disabled', 'unknown']);
    clock.advance(1);
    expect(hashes.map((h) => resolver.fromMemory(h))).toEqual([undefined, undefined, undefined]);
    expect((await Promise.all(hashes.map((h) => resolver.resolve(h)))).map((v) => v.kind)).toEqual(['valid', 'disabled', 'unknown']);
    expect(store.lookups).toBe(6);
  });

  it('keeps a key it saw disabled disabled, though the store later forgets the disable (an older snapshot)', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await store.disable(record.id, new Date());
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
    // The store answers with the record as it was before the disable: after the TTL, on a resync, on a notice.
    const forgotten = new MemoryKeyStore();
    await forgotten.create(record);
    store.findByHash = async (h) => (store.lookups++, forgotten.findByHash(h));
    clock.advance(60_000);
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
    store.emit({ type: 'resync' });
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
    store.emit({ type: 'changed', keyHash: record.key_hash });
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
    expect(store.lookups).toBe(4); // asked each time, as for any other key
  });

  it('drops a key at once when told it changed', async () => {
    const { store, resolver } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    await store.disable(record.id, new Date()); // MemoryKeyStore notifies like pub/sub
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
  });

  it('does not re-cache a record fetched before a change notice', async () => {
    const { store, resolver } = setup();
    const record = newRecord();
    await store.create(record);
    let open!: () => void;
    store.gate = new Promise((resolve) => (open = resolve));
    const slow = resolver.resolve(record.key_hash);
    await new Promise((resolve) => setImmediate(resolve));
    // The lookup has read the old record but not returned; a change lands meanwhile.
    store.emit({ type: 'changed', keyHash: record.key_hash });
    open();
    store.gate = undefined;
    await slow;
    await resolver.resolve(record.key_hash);
    expect(store.lookups).toBe(2);
  });

  it('does not let a request that arrives after a change notice share a lookup begun before it', async () => {
    const { store, resolver } = setup();
    const record = newRecord();
    await store.create(record);
    let open!: () => void;
    store.gate = new Promise((resolve) => (open = resolve));
    const before = resolver.resolve(record.key_hash);
    await new Promise((resolve) => setImmediate(resolve));
    store.emit({ type: 'changed', keyHash: record.key_hash });
    const after = resolver.resolve(record.key_hash);
    open();
    await Promise.all([before, after]);
    expect(store.lookups).toBe(2);
  });

  it('drops every verdict on resync', async () => {
    const { store, resolver } = setup();
    const record = newRecord();
    const disabled = newRecord();
    await store.create(record);
    await store.create(disabled);
    await store.disable(disabled.id, new Date());
    const unknown = hashKey(generateKey());
    for (const h of [record.key_hash, disabled.key_hash, unknown]) await resolver.resolve(h);
    store.emit({ type: 'resync' });
    expect([record.key_hash, disabled.key_hash, unknown].map((h) => resolver.fromMemory(h))).toEqual([undefined, undefined, undefined]);
    expect((await resolver.resolve(disabled.key_hash)).kind).toBe('disabled');
    expect(store.lookups).toBe(4);
  });

  it('forgets a valid verdict once the store says the key is gone, also for the next outage', async () => {
    const { store, resolver, clock } = setup({ ttlMs: 1_000 });
    const record = newRecord();
    await store.create(record);
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    store.removed.add(record.key_hash);
    clock.advance(1_000);
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'unknown' });
    // Past the TTL, the store goes down: nothing may stand in for it with the old record.
    clock.advance(60_000);
    store.failing = true;
    store.emit({ type: 'health', available: false, notices: false });
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
  });

  it('runs on a monotonic clock: the wall clock set back does not stretch the TTL', async () => {
    const realNow = Date.now;
    let step = 0;
    Date.now = () => realNow() + step;
    try {
      const store = new ScriptedStore();
      const resolver = new KeyResolver(store, { ttlMs: 50 });
      const record = newRecord();
      await store.create(record);
      await resolver.resolve(record.key_hash);
      step = -3_600_000; // an hour back, as a clock step would
      // Trusted for another hour, were the TTL on the wall clock.
      await waitFor(() => resolver.fromMemory(record.key_hash) === undefined, { timeoutMs: 2_000, what: 'the cached verdict to expire' });
    } finally {
      Date.now = realNow;
    }
  });

  it('fails closed for an uncached key when the store fails', async () => {
    const { store, resolver } = setup();
    store.failing = true;
    await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
  });

  it('refuses a key whose record cannot be read, without taking the store for down', async () => {
    const health: boolean[] = [];
    const { store, resolver } = setup({ onStoreHealth: (h) => health.push(h.available) });
    const record = newRecord();
    await store.create(record);
    store.corrupt = true;
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
    expect(resolver.storeAvailable).toBe(true);
    expect(health).toEqual([]);
    // Nothing remembered either way: the record is read again, and once it is sound the key works.
    store.corrupt = false;
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    expect(store.lookups).toBe(2);
  });

  it('a corrupt record ends what failed lookups began: the store answered', async () => {
    const { store, resolver } = setup();
    store.failing = true;
    await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
    expect(resolver.storeAvailable).toBe(false);
    store.failing = false;
    store.corrupt = true;
    await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
    expect(resolver.storeAvailable).toBe(true);
  });

  it('while lookups fail, asks the store itself, and is available again once it answers, with no traffic', async () => {
    jest.useFakeTimers();
    try {
      const health: boolean[] = [];
      const { store, resolver } = setup({ failureProbeIntervalMs: 1_000, onStoreHealth: (h) => health.push(h.available) });
      store.failing = true; // a stall that timed one lookup out, while no connection dropped
      await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
      await jest.advanceTimersByTimeAsync(3_000);
      expect([resolver.storeAvailable, store.lookups]).toEqual([false, 4]); // three probes, all failed
      store.failing = false;
      await jest.advanceTimersByTimeAsync(1_000);
      expect(resolver.storeAvailable).toBe(true);
      expect(health).toEqual([false, true]);
      // Healthy: no more probes.
      await jest.advanceTimersByTimeAsync(60_000);
      expect(store.lookups).toBe(5);
    } finally {
      jest.useRealTimers();
    }
  });

  it('stops probing once the store says it is back, and when closed', async () => {
    jest.useFakeTimers();
    try {
      const { store, resolver } = setup({ failureProbeIntervalMs: 1_000 });
      store.failing = true;
      await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
      store.emit({ type: 'health', available: true, notices: true });
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.lookups).toBe(1);
      await expect(resolver.resolve(hashKey(generateKey()))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
      resolver.close();
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.lookups).toBe(2);

    } finally {
      jest.useRealTimers();
    }
  });

  it('starts no probing when a lookup under way at close fails after it (a drain that ended during a stall)', async () => {
    jest.useFakeTimers();
    try {
      const { store, resolver } = setup({ failureProbeIntervalMs: 1_000 });
      let release!: () => void;
      store.gate = new Promise((resolve) => (release = resolve));
      store.failing = true;
      const pending = resolver.resolve(hashKey(generateKey()));
      resolver.close();
      release();
      await expect(pending).rejects.toBeInstanceOf(KeyStoreUnavailableError);
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.lookups).toBe(1);
    } finally {
      jest.useRealTimers();
    }
  });

  it('keeps cached keys working during an outage for the grace period only', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    store.emit({ type: 'health', available: false, notices: false });
    store.failing = true;
    clock.advance(29_000);
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    clock.advance(1_000);
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
    // Recovery needs nobody: the store is back, lookups succeed, the key is valid again.
    store.failing = false;
    store.emit({ type: 'health', available: true, notices: true });
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
  });

  it('serves an expired entry during a short outage that only lookups noticed', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    clock.advance(60_000);
    store.failing = true;
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    clock.advance(30_000);
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
  });

  it('lets no answer stand in for the store once Redis last confirmed it longer ago than the TTL and the grace together', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    // A day unused, then removed by hand (no notice), then an outage: the day-old answer is not the store's.
    clock.advance(24 * 3600_000);
    store.removed.add(record.key_hash);
    store.emit({ type: 'health', available: false, notices: false });
    store.failing = true;
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
  });

  it('lets an answer confirmed just before a silent outage stand in until it is older than the TTL and the grace together', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    clock.advance(75_000); // expired 15 s ago, and nobody asked since
    store.failing = true; // seen first by this lookup
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    clock.advance(14_000);
    expect(resolver.fromMemory(record.key_hash)).toMatchObject({ kind: 'valid' }); // 89 s old, 14 s into the outage
    clock.advance(1_000);
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined(); // 90 s old, though the grace has 15 s to go
    await expect(resolver.resolve(record.key_hash)).rejects.toBeInstanceOf(KeyStoreUnavailableError);
  });

  it('without change notices while lookups work, trusts a verdict for 1 s only, and grants no outage grace', async () => {
    const health: { available: boolean; notices: boolean }[] = [];
    const { store, resolver, clock } = setup({ onStoreHealth: (h) => health.push(h) });
    const record = newRecord();
    await store.create(record);
    store.emit({ type: 'health', available: true, notices: false }); // e.g. the subscription refused (NOPERM)
    expect([resolver.storeAvailable, resolver.changeNotices]).toEqual([true, false]);
    expect(health).toEqual([{ available: true, notices: false }]);
    await resolver.resolve(record.key_hash);
    clock.advance(999);
    expect(resolver.fromMemory(record.key_hash)?.kind).toBe('valid');
    // A disable with no notice to say so: seen at the next lookup, 1 s after the last.
    await store.disable(record.id, new Date());
    store.emit({ type: 'health', available: true, notices: false });
    clock.advance(1);
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    expect(await resolver.resolve(record.key_hash)).toEqual({ kind: 'disabled' });
    expect(store.lookups).toBe(2);
    // Notices back: the TTL again.
    store.emit({ type: 'health', available: true, notices: true });
    clock.advance(59_000);
    expect(resolver.fromMemory(record.key_hash)?.kind).toBe('disabled');
  });

  it('asks the store again once an outage outlives the grace, and trusts a fresh answer', async () => {
    const { store, resolver, clock } = setup();
    const record = newRecord();
    await store.create(record);
    await resolver.resolve(record.key_hash);
    store.emit({ type: 'health', available: false, notices: false });
    clock.advance(31_000);
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    expect(store.lookups).toBe(2);
  });
});
