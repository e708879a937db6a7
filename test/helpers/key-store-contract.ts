import { generateKey, generateKeyId, hashKey, type ApiKeyRecord } from '../../src/keys/api-key.js';
import { KeyDisabledError, KeyNotFoundError, type KeyStore, type KeyStoreEvent } from '../../src/keys/key-store.js';
import { waitFor } from './wait.js';

export function newRecord(overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id: generateKeyId(),
    key_hash: hashKey(generateKey()),
    acquirer_id: 'acq_1',
    permissions: ['eod_list', 'eod_read'],
    allowed_ips: [],
    description: 'test key',
    created_at: new Date().toISOString(),
    disabled_at: null,
    ...overrides,
  };
}

/**
 * The behaviour every KeyStore must have, run against each implementation.
 * `open` returns a fresh, empty store; `observer` a second store on the same data (another process).
 */
export function keyStoreContract(name: string, open: () => Promise<{ store: KeyStore; observer: KeyStore; close(): Promise<void> }>) {
  describe(`KeyStore contract: ${name}`, () => {
    let store: KeyStore;
    let observer: KeyStore;
    let close: () => Promise<void>;

    beforeEach(async () => {
      ({ store, observer, close } = await open());
    });
    afterEach(async () => close());

    it('finds a created key by hash and by id; null for unknown ones', async () => {
      const record = newRecord();
      await store.create(record);
      expect(await store.findByHash(record.key_hash)).toEqual(record);
      expect(await store.findById(record.id)).toEqual(record);
      expect(await store.findByHash(hashKey(generateKey()))).toBeNull();
      expect(await store.findById('key_missing')).toBeNull();
    });

    it('lists keys oldest first, optionally for one acquirer', async () => {
      const a = newRecord({ acquirer_id: 'acq_a', created_at: '2026-01-01T00:00:00.000Z' });
      const b = newRecord({ acquirer_id: 'acq_b', created_at: '2026-01-02T00:00:00.000Z' });
      const c = newRecord({ acquirer_id: 'acq_a', created_at: '2026-01-03T00:00:00.000Z' });
      for (const r of [c, a, b]) await store.create(r);
      expect((await store.list()).map((r) => r.id)).toEqual([a.id, b.id, c.id]);
      expect((await store.list('acq_a')).map((r) => r.id)).toEqual([a.id, c.id]);
      expect(await store.list('acq_none')).toEqual([]);
    });

    it('updates permissions and whitelist, and tells watchers elsewhere', async () => {
      const record = newRecord();
      await store.create(record);
      const events: KeyStoreEvent[] = [];
      observer.watch((e) => events.push(e));
      const updated = await store.update(record.id, { permissions: ['eod_list'], allowed_ips: ['192.0.2.1'] });
      expect(updated).toEqual({ ...record, permissions: ['eod_list'], allowed_ips: ['192.0.2.1'] });
      expect(await observer.findByHash(record.key_hash)).toEqual(updated);
      await waitFor(() => events.some((e) => e.type === 'changed' && e.keyHash === record.key_hash), { what: 'change notice' });
    });

    it('disables permanently: idempotent, and no update afterwards', async () => {
      const record = newRecord();
      await store.create(record);
      const events: KeyStoreEvent[] = [];
      observer.watch((e) => events.push(e));
      const first = await store.disable(record.id, new Date('2026-02-01T00:00:00Z'));
      expect(first.disabled_at).toBe('2026-02-01T00:00:00.000Z');
      const again = await store.disable(record.id, new Date('2026-03-01T00:00:00Z'));
      expect(again.disabled_at).toBe('2026-02-01T00:00:00.000Z');
      await expect(store.update(record.id, { permissions: ['eod_list'] })).rejects.toBeInstanceOf(KeyDisabledError);
      expect((await store.findById(record.id))?.disabled_at).toBe('2026-02-01T00:00:00.000Z');
      await waitFor(() => events.some((e) => e.type === 'changed' && e.keyHash === record.key_hash), { what: 'change notice' });
    });

    it('refuses to change a key that does not exist', async () => {
      await expect(store.update('key_missing', { permissions: [] })).rejects.toBeInstanceOf(KeyNotFoundError);
      await expect(store.disable('key_missing', new Date())).rejects.toBeInstanceOf(KeyNotFoundError);
    });
  });
}
