import { createHash, createHmac } from 'node:crypto';
import { generateKey, hashKey, type ApiKeyRecord } from '../../../src/keys/api-key.js';
import { KeyHashing, pepperedHash } from '../../../src/keys/key-hash.js';
import { KeyResolver } from '../../../src/keys/key-resolver.js';
import type { KeyStoreEvent } from '../../../src/keys/key-store.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { newRecord } from '../../helpers/key-store-contract.js';

const PEPPER = 'pepper-for-tests-0123456789abcdefghij';

describe('pepperedHash', () => {
  it('is HMAC-SHA256 keyed with the pepper over the 64 hex digits of the key\'s SHA-256', () => {
    const key = 'acquirer_key_' + 'A'.repeat(43);
    const plain = createHash('sha256').update(key, 'utf8').digest('hex');
    const expected = createHmac('sha256', Buffer.from(PEPPER, 'utf8')).update(Buffer.from(plain, 'ascii')).digest('hex');
    expect(hashKey(key)).toBe(plain);
    expect(pepperedHash(PEPPER, plain)).toBe(expected);
    expect(pepperedHash(PEPPER, plain)).toMatch(/^[0-9a-f]{64}$/);
    // Neither the plain hash nor HMAC over the key itself (that form could not be migrated to).
    expect(pepperedHash(PEPPER, plain)).not.toBe(plain);
    expect(pepperedHash(PEPPER, plain)).not.toBe(createHmac('sha256', PEPPER).update(key).digest('hex'));
    expect(pepperedHash(PEPPER + 'x', plain)).not.toBe(expected);
  });
});

describe('KeyHashing', () => {
  const plain = hashKey(generateKey());

  it('without a pepper, is the plain hash everywhere, as before', () => {
    for (const hashing of [new KeyHashing(), new KeyHashing('')]) {
      expect(hashing.peppered).toBe(false);
      expect(hashing.stored(plain)).toBe(plain);
      expect(hashing.lookup(plain)).toEqual([plain]);
      expect(hashing.affected(plain)).toEqual([plain]);
    }
  });

  it('with a pepper, stores peppered, reads the peppered form first, and lets a notice of either form reach the peppered entry', () => {
    const hashing = new KeyHashing(PEPPER);
    const peppered = pepperedHash(PEPPER, plain);
    expect(hashing.peppered).toBe(true);
    expect(hashing.stored(plain)).toBe(peppered);
    expect(hashing.lookup(plain)).toEqual([peppered, plain]);
    expect(hashing.affected(plain)).toContain(peppered);
    expect(hashing.affected(peppered)).toContain(peppered);
  });
});

/** A MemoryKeyStore that counts lookups and lets a test emit notices. */
class CountingStore extends MemoryKeyStore {
  lookups = 0;
  readonly #listeners = new Set<(e: KeyStoreEvent) => void>();

  override async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    this.lookups++;
    return super.findByHash(keyHash);
  }

  override watch(listener: (e: KeyStoreEvent) => void): () => void {
    this.#listeners.add(listener);
    return super.watch(listener);
  }

  emit(event: KeyStoreEvent): void {
    for (const l of this.#listeners) l(event);
  }
}

describe('KeyResolver with a pepper', () => {
  async function cachedKey() {
    const store = new CountingStore();
    const resolver = new KeyResolver(store, { ttlMs: 60_000, pepper: PEPPER, now: () => 1_000 });
    const record = newRecord();
    await store.create(record);
    expect((await resolver.resolve(record.key_hash)).kind).toBe('valid');
    expect(resolver.fromMemory(record.key_hash)?.kind).toBe('valid');
    expect(store.lookups).toBe(1);
    return { store, resolver, record };
  }

  it('keeps a cached verdict when a notice names another key', async () => {
    const { store, resolver, record } = await cachedKey();
    store.emit({ type: 'changed', keyHash: hashKey(generateKey()) });
    expect(resolver.fromMemory(record.key_hash)?.kind).toBe('valid');
    expect(store.lookups).toBe(1);
  });

  it.each([
    ['the plain form (a key created before the pepper, or a command without it)', (h: string) => h],
    ['the peppered form (a key created or moved with the pepper)', (h: string) => pepperedHash(PEPPER, h)],
  ])('drops a cached verdict when a notice names %s', async (_form, named) => {
    const { store, resolver, record } = await cachedKey();
    const before = resolver.fromMemory(record.key_hash);
    expect(before?.kind).toBe('valid');
    store.emit({ type: 'changed', keyHash: named(record.key_hash) });
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    await resolver.resolve(record.key_hash);
    expect(store.lookups).toBe(2);
  });

  it('refuses a key disabled by a command that announces its plain hash', async () => {
    const { store, resolver, record } = await cachedKey();
    await store.disable(record.id, new Date()); // MemoryKeyStore announces record.key_hash, the plain form
    expect(resolver.fromMemory(record.key_hash)).toBeUndefined();
    expect((await resolver.resolve(record.key_hash)).kind).toBe('disabled');
  });
});
