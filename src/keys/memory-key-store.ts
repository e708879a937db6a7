import type { ApiKeyRecord } from './api-key.js';
import { KeyDisabledError, KeyNotFoundError, type KeyChanges, type KeyStore, type KeyStoreListener } from './key-store.js';

/** In-process store for `npm start` and tests. Notifies its watchers as Redis pub/sub would. */
export class MemoryKeyStore implements KeyStore {
  readonly #byHash = new Map<string, ApiKeyRecord>();
  readonly #hashById = new Map<string, string>();
  readonly #listeners = new Set<KeyStoreListener>();

  async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    return this.#byHash.get(keyHash) ?? null;
  }

  async findById(id: string): Promise<ApiKeyRecord | null> {
    const hash = this.#hashById.get(id);
    return hash === undefined ? null : (this.#byHash.get(hash) ?? null);
  }

  async list(acquirerId?: string): Promise<ApiKeyRecord[]> {
    return [...this.#byHash.values()]
      .filter((r) => acquirerId === undefined || r.acquirer_id === acquirerId)
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  async create(record: ApiKeyRecord): Promise<void> {
    if (this.#hashById.has(record.id) || this.#byHash.has(record.key_hash)) throw new Error('key already exists');
    this.#byHash.set(record.key_hash, record);
    this.#hashById.set(record.id, record.key_hash);
  }

  async update(id: string, changes: KeyChanges): Promise<ApiKeyRecord> {
    const current = await this.#existing(id);
    if (current.disabled_at !== null) throw new KeyDisabledError(id);
    return this.#replace({ ...current, ...changes });
  }

  async disable(id: string, at: Date): Promise<ApiKeyRecord> {
    const current = await this.#existing(id);
    if (current.disabled_at !== null) return current;
    return this.#replace({ ...current, disabled_at: at.toISOString() });
  }

  watch(listener: KeyStoreListener): () => void {
    this.#listeners.add(listener);
    listener({ type: 'health', available: true, notices: true });
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
  }

  async #existing(id: string): Promise<ApiKeyRecord> {
    const record = await this.findById(id);
    if (record === null) throw new KeyNotFoundError(id);
    return record;
  }

  #replace(record: ApiKeyRecord): ApiKeyRecord {
    this.#byHash.set(record.key_hash, record);
    for (const listener of this.#listeners) listener({ type: 'changed', keyHash: record.key_hash });
    return record;
  }
}
