/**
 * @module
 * The key store in Redis (layout: redis-layout.ts; connections and health: redis-connections.ts).
 * Key administration writes under WATCH and announces each change on the notice channel; gateways
 * read, and hear the notices.
 */
import { ReplyError, type Cluster, type Redis } from 'ioredis';
import { DEFAULT_REDIS_KEY_PREFIX } from '../config/defaults.js';
import type { ApiKeyRecord } from './api-key.js';
import { ChangeNotAnnouncedError, ChangeUnconfirmedError, CorruptKeyRecordError, CreationUnconfirmedError, KeyDisabledError, KeyNotFoundError, type KeyChanges, type KeyStore, type KeyStoreListener } from './key-store.js';
import { RedisConnections, type RedisConnectionOptions } from './redis-connections.js';
import { STAND_IN_RECORD_JSON } from './key-verdict.js';
import { KEY_HASH, parseRecord, RedisLayout } from './redis-layout.js';
import { CHANGE_RECORD_SCRIPT, ChangeCounter } from './change-counter.js';
import { replication } from './replication.js';
import { KeyHashing } from './key-hash.js';
import { readFirstRecord } from './record-read.js';
import { rehashRecords, type RehashOutcome } from './rehash.js';

const MAX_OPTIMISTIC_RETRIES = 10;

export interface RedisKeyStoreOptions extends Omit<RedisConnectionOptions, 'channel' | 'onEvent'> {
  readonly prefix?: string;
  /** KEY_HASH_PEPPER: lookups read the peppered form and then the plain one; new keys are stored peppered. */
  readonly pepper?: string | undefined;
  /** Subscribe to change notices (gateways). Key administration leaves it off: it only publishes. */
  readonly subscribe?: boolean;
  /** Told, after each change notice is published, how many subscribers Redis handed it to. */
  readonly onAnnounced?: (receivers: number) => void;
  /**
   * Told, after each change is written, whether a replica holds it (waiting up to
   * REPLICA_CONFIRMATION_MS), or why that could not be asked.
   */
  readonly onReplicated?: (outcome: { readonly replicas: number; readonly confirmed: boolean } | { readonly unknown: string }) => void;
}

/** How long a key command waits for a replica to confirm its change (WAIT). */
export const REPLICA_CONFIRMATION_MS = 1000;

export class RedisKeyStore implements KeyStore {
  readonly #connections: RedisConnections;
  readonly #layout: RedisLayout;
  readonly #listeners = new Set<KeyStoreListener>();
  readonly #onAnnounced: ((receivers: number) => void) | undefined;
  readonly #onReplicated: RedisKeyStoreOptions['onReplicated'];
  readonly #counter = new ChangeCounter();
  readonly #hashing: KeyHashing;

  constructor(options: RedisKeyStoreOptions) {
    this.#hashing = new KeyHashing(options.pepper);
    this.#onAnnounced = options.onAnnounced;
    this.#onReplicated = options.onReplicated;
    const prefix = options.prefix ?? DEFAULT_REDIS_KEY_PREFIX;
    let layout: RedisLayout | undefined;
    const subscribe = options.subscribe === true;
    this.#connections = new RedisConnections({
      ...options,
      channel: subscribe ? (db) => (layout = new RedisLayout(prefix, db)).channel : undefined,
      // The counter's name does not depend on the database: no layout is needed for it yet.
      versionKey: subscribe ? new RedisLayout(prefix, 0).version : undefined,
      onVersion: (stored) => {
        if (!this.#counter.aheadOfNotices(stored)) return;
        options.onError?.(new Error('the change counter is ahead of the notices heard: a notice was lost, or is late; everything cached is dropped'), 'key change counter');
        this.#emit({ type: 'resync' });
      },
      onEvent: (event) => {
        if (event.type === 'resync') this.#resubscribed();
        if (event.type === 'health' && !event.notices) this.#counter.reset();
        if (event.type !== 'message') return this.#emit(event);
        const notice = this.#layout.parseNotice(event.message);
        this.#counter.heard(notice?.version);
        this.#emit(notice === null ? { type: 'resync' } : { type: 'changed', keyHash: notice.keyHash, publishedAt: notice.publishedAt });
      },
    });
    this.#layout = layout ?? new RedisLayout(prefix, this.#connections.db);
  }

  /** Subscribed anew (and everything cached dropped): the counter now is what later notices are judged against. */
  #resubscribed(): void {
    this.#connections.client.get(this.#layout.version).then(
      (stored) => this.#counter.subscribedAt(Number(stored ?? 0)),
      () => {}, // the next health check reads it; until a baseline, no gap is judged
    );
  }

  /** Key administration: connect now, and fail with a clear error when Redis is not there. */
  connect(): Promise<void> {
    return this.#connections.connect();
  }

  /**
   * A string value; one of another type (a hash, a list …) is CorruptKeyRecordError: Redis answered.
   * `name`: the key as the error gives it; `from`: a connection of its own (a Cluster node's).
   */
  async #getString(key: string, name: string, from: Redis | Cluster = this.#connections.client): Promise<string | null> {
    try {
      return await from.get(key);
    } catch (err) {
      if (err instanceof Error && err.message.startsWith('WRONGTYPE')) throw new CorruptKeyRecordError(`${name} is not a string value`);
      throw err;
    }
  }

  /**
   * The key record an id maps to. A mapping that is no key hash (it was edited by hand: a raw key
   * pasted there, a typo) is CorruptKeyRecordError, never a lookup: it would hide a working key from
   * `show` and `list`, and put whatever it holds into a Redis key name and an error message.
   */
  async #hashOf(id: string): Promise<string | null> {
    const hash = await this.#getString(this.#layout.idKey(id), this.#layout.idKey(id));
    if (hash !== null && !KEY_HASH.test(hash)) throw this.#notAHash(id);
    return hash;
  }

  #notAHash(id: string): CorruptKeyRecordError {
    return new CorruptKeyRecordError(`${this.#layout.idKey(id)} does not hold a key hash`);
  }

  /** Whether a key that MGET answered nil for holds a value of another type (nil too), rather than none. */
  async #holdsAnotherType(key: string): Promise<boolean> {
    return (await this.#connections.client.type(key)) !== 'none';
  }

  /** `keyHash`: the presented key's plain hash; with a pepper, both forms are read in one round trip. */
  async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const forms = this.#hashing.lookup(keyHash);
    const { raw, hash } = forms.length === 1 ? { raw: await this.#getString(this.#layout.recordKey(keyHash), this.#layout.recordName(keyHash)), hash: keyHash } : await readFirstRecord(this.#connections.client, this.#layout, forms);
    const name = this.#layout.recordName(hash);
    // No record: one is read all the same, so that "no such key" takes as long as a key (key-verdict.ts).
    const record = parseRecord(raw ?? STAND_IN_RECORD_JSON, name);
    return raw === null ? null : record;
  }

  async findById(id: string): Promise<ApiKeyRecord | null> {
    const hash = await this.#hashOf(id);
    return hash === null ? null : this.findByHash(hash);
  }

  async list(acquirerId?: string, onCorrupt?: (what: string, err: Error) => void): Promise<ApiKeyRecord[]> {
    const ids = await this.#connections.client.smembers(this.#layout.ids);
    if (ids.length === 0) return [];
    const hashes = await this.#connections.client.mget(ids.map((id) => this.#layout.idKey(id)));
    const present: string[] = [];
    // An id whose mapping is of another type, or no key hash, would hide a working key from every listing.
    for (const [i, hash] of hashes.entries()) {
      const id = ids[i]!;
      if (hash !== null && KEY_HASH.test(hash)) present.push(hash);
      else if (hash !== null) onCorrupt?.(`id ${id}`, this.#notAHash(id));
      else if (await this.#holdsAnotherType(this.#layout.idKey(id))) onCorrupt?.(`id ${id}`, new CorruptKeyRecordError(`${this.#layout.idKey(id)} is not a string value`));
    }
    if (present.length === 0) return [];
    const raws = await this.#connections.client.mget(present.map((h) => this.#layout.recordKey(h)));
    const records: ApiKeyRecord[] = [];
    for (const [i, raw] of raws.entries()) {
      let record: ApiKeyRecord | null;
      try {
        // MGET gives nil for a value that is not a string: missing (a key being created), or of another type.
        if (raw === null && (await this.#holdsAnotherType(this.#layout.recordKey(present[i]!)))) {
          throw new CorruptKeyRecordError(`${this.#layout.recordName(present[i]!)} is not a string value`);
        }
        record = parseRecord(raw, this.#layout.recordName(present[i]!));
      } catch (err) {
        // One bad record must not hide the others; the caller decides what to make of it.
        onCorrupt?.(`sha256 ${present[i]!.slice(0, 12)}…`, err as Error);
        continue;
      }
      if (record !== null && (acquirerId === undefined || record.acquirer_id === acquirerId)) records.push(record);
    }
    return records.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  /**
   * The id mapping, the record and the id's place in the set, in one transaction: a lost connection
   * leaves none of them (a mapping without its record would hide an id from list and show alike).
   * Redis does not roll back a transaction in which one command fails, so what could fail (an `ids`
   * of another type) is checked first; a refusal all the same is reported, never taken for success.
   */
  async create(given: ApiKeyRecord): Promise<void> {
    // With a pepper, the record is stored under its peppered hash (given: the plain one), and its id marked migrated.
    const record = { ...given, key_hash: this.#hashing.stored(given.key_hash) };
    const idKey = this.#layout.idKey(record.id);
    const idsKey = this.#layout.ids;
    // Not `ids`: every other key created meanwhile would abort this one. Its type is checked to
    // refuse a standing corruption; one made in the instant between check and EXEC is undone below.
    await this.#connections.client.watch(idKey);
    const [exists, idsType] = await Promise.all([this.#connections.client.exists(idKey), this.#connections.client.type(idsKey)]);
    if (exists === 1 || (idsType !== 'set' && idsType !== 'none')) {
      await this.#connections.client.unwatch();
      if (exists === 1) throw new Error(`key id ${record.id} already exists`);
      throw new Error(`${idsKey} is not a set (it is a ${idsType}): nothing was written; repair or delete that value`);
    }
    const transaction = this.#connections.client.multi().set(idKey, record.key_hash).set(this.#layout.recordKey(record.key_hash), JSON.stringify(record)).sadd(idsKey, record.id);
    const results = await (this.#hashing.peppered ? transaction.sadd(this.#layout.peppered, record.id) : transaction)
      .exec()
      .catch((err: unknown) => {
        throw refusedOr(err, () => new CreationUnconfirmedError(record.id, err));
      });
    if (results === null) throw new Error(`key id ${record.id} already exists`); // taken in between
    const failed = results.find(([err]) => err !== null);
    if (failed !== undefined) {
      // `ids` changed type after the check: what was written is taken back, so no key is left that list cannot show.
      await this.#connections.client.del(idKey, this.#layout.recordKey(record.key_hash));
      throw new Error(`Redis refused part of the key's creation (${failed[0]!.message}): nothing was kept`);
    }
  }

  async update(id: string, changes: KeyChanges): Promise<ApiKeyRecord> {
    return this.#modify(id, (current) => {
      if (current.disabled_at !== null) throw new KeyDisabledError(id);
      return { ...current, ...changes };
    });
  }

  async disable(id: string, at: Date): Promise<ApiKeyRecord> {
    return this.#modify(id, (current) => (current.disabled_at !== null ? null : { ...current, disabled_at: at.toISOString() }));
  }

  /** The listener is told the current health at once: down until connected, without notices until subscribed. */
  watch(listener: KeyStoreListener): () => void {
    this.#listeners.add(listener);
    listener({ type: 'health', ...this.#connections.health });
    return () => this.#listeners.delete(listener);
  }

  /** `keys rehash`: moves every record still in the plain form to the peppered one, one key at a time (rehash.ts). */
  rehash(onCorrupt: (what: string, err: Error) => void): Promise<RehashOutcome> {
    return rehashRecords(this.#connections, this.#layout, this.#hashing, onCorrupt);
  }

  async close(): Promise<void> {
    this.#listeners.clear();
    await this.#connections.close();
  }

  /**
   * Read, then compare-and-set in one script on the primary's own connection (change-counter.ts),
   * so two administrators cannot lose each other's change and WAIT counts this write; then tell
   * every gateway. `change` returning null means nothing to write (and nothing to announce).
   */
  async #modify(id: string, change: (current: ApiKeyRecord) => ApiKeyRecord | null): Promise<ApiKeyRecord> {
    for (let attempt = 0; attempt < MAX_OPTIMISTIC_RETRIES; attempt++) {
      const hash = await this.#hashOf(id);
      if (hash === null) throw new KeyNotFoundError(id);
      const recordKey = this.#layout.recordKey(hash);
      const writer = await this.#connections.writer(recordKey);
      const raw = await this.#getString(recordKey, this.#layout.recordName(hash), writer);
      const current = parseRecord(raw, this.#layout.recordName(hash));
      if (current === null) throw new KeyNotFoundError(id);
      const next = change(current);
      if (next === null) {
        // Nothing to write (already disabled), but a previous attempt may have written and then
        // failed to announce it: announce again, so retrying is always safe.
        await this.#publishChange(id, hash, undefined);
        return current;
      }
      // A failure here may come after Redis ran the script (its answer lost with the connection):
      // the change may be written and is not announced, which a plain connection error would not say.
      let version: unknown;
      try {
        version = await writer.eval(CHANGE_RECORD_SCRIPT, 2, recordKey, this.#layout.version, raw!, JSON.stringify(next));
      } catch (err) {
        if (await this.#connections.redirected(err)) continue; // the slot moved: read again on its new primary
        throw refusedOr(err, () => new ChangeUnconfirmedError(id, err));
      }
      if (version === null) continue; // someone else wrote in between: read again
      await this.#publishChange(id, hash, Number(version));
      await this.#confirmReplicated(writer);
      return next;
    }
    throw new Error(`key ${id} is being changed concurrently; try again`);
  }

  async #publishChange(id: string, hash: string, version: number | undefined): Promise<void> {
    let receivers: number;
    try {
      receivers = await this.#connections.publish(this.#layout.channel, this.#layout.notice(hash, Date.now(), version));
    } catch (err) {
      throw new ChangeNotAnnouncedError(id, err);
    }
    this.#onAnnounced?.(receivers);
  }

  async #confirmReplicated(writer: Redis): Promise<void> {
    if (this.#onReplicated === undefined) return;
    try {
      this.#onReplicated(await replication(writer, REPLICA_CONFIRMATION_MS));
    } catch (err) {
      this.#onReplicated({ unknown: (err as Error).message });
    }
  }

  #emit(event: Parameters<KeyStoreListener>[0]): void {
    for (const listener of this.#listeners) listener(event);
  }

}

/**
 * An EXEC that failed: a refusal Redis answered (a read-only replica, out of memory, an ACL) wrote
 * nothing, and says why in the errors of the commands it discarded; anything else (the connection
 * lost, a timeout) leaves the outcome unknown (`unknown()`).
 */
function refusedOr(err: unknown, unknown: () => Error): Error {
  if (!(err instanceof ReplyError)) return unknown();
  const why = ((err as { previousErrors?: Error[] }).previousErrors ?? []).map((e) => e.message);
  return new Error(`Redis refused the write, and nothing was written: ${[...new Set(why)].join('; ') || (err as Error).message}`);
}
