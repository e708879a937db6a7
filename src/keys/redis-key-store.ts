import { Redis, ReplyError, type RedisOptions } from 'ioredis';
import { z } from 'zod';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS, DEFAULT_REDIS_HEALTH_CHECK_INTERVAL_MS, DEFAULT_REDIS_KEY_PREFIX } from '../config/defaults.js';
import { parseCidr } from '../net/ip-allowlist.js';
import { isValidAcquirerId, type ApiKeyRecord } from './api-key.js';
import { ChangeNotAnnouncedError, ChangeUnconfirmedError, CorruptKeyRecordError, CreationUnconfirmedError, KeyDisabledError, KeyNotFoundError, type KeyChanges, type KeyStore, type KeyStoreListener } from './key-store.js';

const RECONNECT_MAX_DELAY_MS = 1000;
const MAX_OPTIMISTIC_RETRIES = 10;

const recordSchema = z.strictObject({
  id: z.string().min(1),
  key_hash: z.string().regex(/^[0-9a-f]{64}$/),
  // What the request path relies on is checked as strictly as when it was written: the acquirer id
  // becomes a header value, and a whitelist entry that does not parse must not become "any address".
  acquirer_id: z.string().refine(isValidAcquirerId),
  permissions: z.array(z.string()),
  allowed_ips: z.array(z.string().refine((cidr) => {
    const parsed = parseCidr(cidr);
    return parsed.ok && parsed.cidr === cidr;
  })),
  description: z.string(),
  created_at: z.string(),
  disabled_at: z.string().nullable(),
});

/** `name`: the record's Redis key as messages give it (RedisKeyStore.#recordName). */
function parseRecord(raw: string | null, name: string): ApiKeyRecord | null {
  if (raw === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new CorruptKeyRecordError(`${name}: key record is not JSON`);
  }
  const parsed = recordSchema.safeParse(value);
  if (!parsed.success) throw new CorruptKeyRecordError(`${name}: key record has an unexpected shape`);
  return parsed.data;
}

/** What an id maps to: the name of its key record, the SHA-256 of the key (64 lower-case hex digits). */
const KEY_HASH = /^[0-9a-f]{64}$/;

export interface RedisKeyStoreOptions {
  readonly url: string;
  readonly prefix?: string;
  /** Commands that get no reply within this time reject; keeps a black-holed Redis from stalling requests. */
  readonly commandTimeoutMs?: number;
  /**
   * Subscribe to change notices (gateways). Key administration leaves it off: it only publishes.
   */
  readonly subscribe?: boolean;
  /** Key administration: wait for the connection instead of failing at once, then give up. */
  readonly waitForConnection?: boolean;
  /** Gateways: ping both connections this often and reconnect one that does not answer. */
  readonly healthCheckIntervalMs?: number;
  /** Told about connection and subscription failures (never about a missing key). */
  readonly onError?: (err: unknown, context: string) => void;
}

/**
 * The channel of change notices. Pub/sub ignores Redis's numbered databases: without the number, two
 * environments kept apart by database (`redis://redis/2`, `redis://redis/3`) under the same prefix
 * would hear each other's notices. Database 0 keeps the plain name.
 */
function noticeChannel(prefix: string, db: number): string {
  return db === 0 ? `${prefix}events` : `${prefix}events:${db}`;
}

/**
 * Layout, under the prefix: `key:<sha256>` → record (JSON), `id:<id>` → sha256, `ids` → set of ids,
 * channel `events` (noticeChannel) → `{"type":"changed","key_hash":…}` after every update or disable.
 *
 * Gateways fail fast rather than queue: no offline queue, a command timeout, and reconnection
 * forever with a short back-off, so an outage costs a 503 and recovery needs nobody.
 */
export class RedisKeyStore implements KeyStore {
  readonly #client: Redis;
  readonly #subscriber: Redis | undefined;
  readonly #prefix: string;
  readonly #channel: string;
  readonly #listeners = new Set<KeyStoreListener>();
  #healthy = false;
  #subscribed = false;
  /**
   * Why the SELECT of REDIS_URL's database failed on the latest connect (`ERR DB index is out of
   * range`), if it did. ioredis reports it and goes on to "ready" on database 0, where the keys
   * are another set (another environment's, where environments share a Redis by database).
   */
  #databaseRefused: Error | undefined;
  /** The main connection has been ready once. */
  #connectedOnce = false;
  /** Why the main connection last failed (refused, a wrong password): a failed connect says only that it closed. */
  #connectionFailure: Error | undefined;
  /**
   * Connections whose health-check PING went unanswered, until they are ready again: down from that
   * moment. The reconnect that follows reports nothing until the socket closes, and ioredis gives a
   * socket it ends up to 2 s to close, cached keys trusted all the while.
   */
  readonly #unanswered = new Set<Redis>();
  readonly #onError: NonNullable<RedisKeyStoreOptions['onError']>;
  readonly #healthCheck: NodeJS.Timeout | undefined;

  constructor(options: RedisKeyStoreOptions) {
    this.#prefix = options.prefix ?? DEFAULT_REDIS_KEY_PREFIX;
    const waiting = options.waitForConnection === true;
    const common: RedisOptions = {
      enableOfflineQueue: waiting,
      maxRetriesPerRequest: waiting ? 1 : 0,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: 1000,
      // Key administration connects once (a few tries) and never again: on a reconnect ioredis sends
      // what was queued and unanswered as the connection turns ready, before its 'ready' event, so
      // before a refused database could be noticed. Those would be written to database 0. A gateway
      // queues nothing, and tries a refused database again no more than every second (each try
      // resets ioredis's count).
      retryStrategy: waiting
        ? (times) => (this.#connectedOnce || times > 3 ? null : 200)
        : (times) => (this.#databaseRefused === undefined ? Math.min(times * 100, RECONNECT_MAX_DELAY_MS) : RECONNECT_MAX_DELAY_MS),
      autoResendUnfulfilledCommands: !waiting,
      lazyConnect: waiting,
    };
    this.#client = new Redis(options.url, { ...common, connectionName: 'acquirer-gateway' });
    this.#channel = noticeChannel(this.#prefix, this.#client.options.db ?? 0);
    const onError = (this.#onError = options.onError ?? (() => {}));
    this.#client.on('connect', () => (this.#databaseRefused = undefined));
    this.#client.on('ready', () => (this.#connectedOnce = true));
    this.#client.on('error', (err: unknown) => {
      this.#connectionFailure = err as Error;
      if ((err as { command?: { name?: string } }).command?.name === 'select') this.#databaseRefused = err as Error;
      onError(err, 'redis connection');
    });
    this.#client.on('ready', () => {
      this.#unanswered.delete(this.#client);
      // Not one command on database 0: the connection is dropped (and tried again) before any is sent.
      if (this.#databaseRefused !== undefined) {
        onError(new Error(`Redis refused the database REDIS_URL names (${this.#databaseRefused.message}): the key store stays unavailable`), 'redis connection');
        this.#client.disconnect(true);
      }
      this.#updateHealth();
    });
    this.#client.on('close', () => this.#updateHealth());
    if (options.subscribe === true) {
      // Subscribed on every (re)connect by us, not by ioredis: with no offline queue a subscription
      // asked for before the connection is up would be lost, and we must know when it is live.
      const subscriber = new Redis(options.url, { ...common, autoResubscribe: false, connectionName: 'acquirer-gateway:events' });
      this.#subscriber = subscriber;
      subscriber.on('error', (err: unknown) => onError(err, 'redis change-notice connection'));
      subscriber.on('close', () => {
        this.#subscribed = false;
        this.#updateHealth();
      });
      subscriber.on('ready', () => {
        this.#unanswered.delete(subscriber);
        subscriber.subscribe(this.#channel).then(
          () => {
            // Notices published before this moment were never received (at start-up too, if the first
            // subscribe failed while records were being cached): drop everything cached.
            this.#emit({ type: 'resync' });
            this.#subscribed = true;
            this.#updateHealth();
          },
          (err: unknown) => {
            onError(err, 'subscribing to key change notices');
            subscriber.disconnect(true); // reconnect and try again
          },
        );
      });
      subscriber.on('message', (channel: string, message: string) => {
        if (channel !== this.#channel) return;
        const keyHash = this.#parseNotice(message);
        this.#emit(keyHash === null ? { type: 'resync' } : { type: 'changed', keyHash });
      });
    }
    if (!waiting) {
      const interval = options.healthCheckIntervalMs ?? DEFAULT_REDIS_HEALTH_CHECK_INTERVAL_MS;
      this.#healthCheck = setInterval(() => this.#checkHealth(), interval);
      this.#healthCheck.unref();
    }
  }

  /**
   * A black-holed Redis keeps its sockets open and silent: nothing closes, so nothing would say the
   * store is down while cached keys go on being trusted. A PING that times out reconnects that
   * connection, which reports it down until it answers again (and resubscribes, then resyncs).
   */
  #checkHealth(): void {
    for (const connection of [this.#client, this.#subscriber]) {
      if (connection === undefined || connection.status !== 'ready') continue;
      connection.ping().catch((err: unknown) => {
        this.#onError(err, connection === this.#client ? 'redis health check' : 'redis change-notice health check');
        this.#unanswered.add(connection);
        this.#updateHealth();
        connection.disconnect(true);
      });
    }
  }

  /** Key administration: connect now, and fail with a clear error when Redis is not there. */
  async connect(): Promise<void> {
    if (this.#client.status === 'wait') {
      await this.#client.connect().catch((err: unknown) => {
        throw this.#connectionFailure ?? err;
      });
    }
    if (this.#databaseRefused !== undefined) throw new Error(`Redis refused the database REDIS_URL names: ${this.#databaseRefused.message}`);
  }

  /**
   * A string value; one of another type (a hash, a list …) is CorruptKeyRecordError: Redis answered.
   * `name`: the key as the error gives it.
   */
  async #getString(key: string, name: string): Promise<string | null> {
    try {
      return await this.#client.get(key);
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
    const hash = await this.#getString(this.#idKey(id), this.#idKey(id));
    if (hash !== null && !KEY_HASH.test(hash)) throw this.#notAHash(id);
    return hash;
  }

  #notAHash(id: string): CorruptKeyRecordError {
    return new CorruptKeyRecordError(`${this.#idKey(id)} does not hold a key hash`);
  }

  /** Whether a key that MGET answered nil for holds a value of another type (nil too), rather than none. */
  async #holdsAnotherType(key: string): Promise<boolean> {
    return (await this.#client.type(key)) !== 'none';
  }

  async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const name = this.#recordName(keyHash);
    return parseRecord(await this.#getString(this.#recordKey(keyHash), name), name);
  }

  async findById(id: string): Promise<ApiKeyRecord | null> {
    const hash = await this.#hashOf(id);
    return hash === null ? null : this.findByHash(hash);
  }

  async list(acquirerId?: string, onCorrupt?: (what: string, err: Error) => void): Promise<ApiKeyRecord[]> {
    const ids = await this.#client.smembers(this.#prefix + 'ids');
    if (ids.length === 0) return [];
    const hashes = await this.#client.mget(ids.map((id) => this.#idKey(id)));
    const present: string[] = [];
    // An id whose mapping is of another type, or no key hash, would hide a working key from every listing.
    for (const [i, hash] of hashes.entries()) {
      const id = ids[i]!;
      if (hash !== null && KEY_HASH.test(hash)) present.push(hash);
      else if (hash !== null) onCorrupt?.(`id ${id}`, this.#notAHash(id));
      else if (await this.#holdsAnotherType(this.#idKey(id))) onCorrupt?.(`id ${id}`, new CorruptKeyRecordError(`${this.#idKey(id)} is not a string value`));
    }
    if (present.length === 0) return [];
    const raws = await this.#client.mget(present.map((h) => this.#recordKey(h)));
    const records: ApiKeyRecord[] = [];
    for (const [i, raw] of raws.entries()) {
      let record: ApiKeyRecord | null;
      try {
        // MGET gives nil for a value that is not a string: missing (a key being created), or of another type.
        if (raw === null && (await this.#holdsAnotherType(this.#recordKey(present[i]!)))) {
          throw new CorruptKeyRecordError(`${this.#recordName(present[i]!)} is not a string value`);
        }
        record = parseRecord(raw, this.#recordName(present[i]!));
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
  async create(record: ApiKeyRecord): Promise<void> {
    const idKey = this.#idKey(record.id);
    const idsKey = this.#prefix + 'ids';
    // Not `ids`: every other key created meanwhile would abort this one. Its type is checked to
    // refuse a standing corruption; one made in the instant between check and EXEC is undone below.
    await this.#client.watch(idKey);
    const [exists, idsType] = await Promise.all([this.#client.exists(idKey), this.#client.type(idsKey)]);
    if (exists === 1 || (idsType !== 'set' && idsType !== 'none')) {
      await this.#client.unwatch();
      if (exists === 1) throw new Error(`key id ${record.id} already exists`);
      throw new Error(`${idsKey} is not a set (it is a ${idsType}): nothing was written; repair or delete that value`);
    }
    const results = await this.#client
      .multi()
      .set(idKey, record.key_hash)
      .set(this.#recordKey(record.key_hash), JSON.stringify(record))
      .sadd(idsKey, record.id)
      .exec()
      .catch((err: unknown) => {
        throw refusedOr(err, () => new CreationUnconfirmedError(record.id, err));
      });
    if (results === null) throw new Error(`key id ${record.id} already exists`); // taken in between
    const failed = results.find(([err]) => err !== null);
    if (failed !== undefined) {
      // `ids` changed type after the check: what was written is taken back, so no key is left that list cannot show.
      await this.#client.del(idKey, this.#recordKey(record.key_hash));
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

  /** The listener is told the current health at once: down until connected and subscribed. */
  watch(listener: KeyStoreListener): () => void {
    this.#listeners.add(listener);
    listener({ type: 'health', healthy: this.#healthy });
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    clearInterval(this.#healthCheck);
    this.#listeners.clear();
    await Promise.all([this.#client, this.#subscriber].map((c) => c?.quit().catch(() => c.disconnect())));
  }

  /**
   * Read-modify-write under WATCH so two administrators cannot lose each other's change, then tell
   * every gateway. `change` returning null means nothing to write (and nothing to announce).
   */
  async #modify(id: string, change: (current: ApiKeyRecord) => ApiKeyRecord | null): Promise<ApiKeyRecord> {
    for (let attempt = 0; attempt < MAX_OPTIMISTIC_RETRIES; attempt++) {
      const hash = await this.#hashOf(id);
      if (hash === null) throw new KeyNotFoundError(id);
      const recordKey = this.#recordKey(hash);
      await this.#client.watch(recordKey);
      let current: ApiKeyRecord | null;
      try {
        current = parseRecord(await this.#getString(recordKey, this.#recordName(hash)), this.#recordName(hash));
      } catch (err) {
        await this.#client.unwatch();
        throw err;
      }
      if (current === null) {
        await this.#client.unwatch();
        throw new KeyNotFoundError(id);
      }
      let next: ApiKeyRecord | null;
      try {
        next = change(current);
      } catch (err) {
        await this.#client.unwatch();
        throw err;
      }
      if (next === null) {
        await this.#client.unwatch();
        // Nothing to write (already disabled), but a previous attempt may have written and then
        // failed to announce it: announce again, so retrying is always safe.
        await this.#publishChange(id, hash);
        return current;
      }
      // A failure here may come after Redis ran the transaction (its answer lost with the connection):
      // the change may be written and is not announced, which a plain connection error would not say.
      const committed = await this.#client
        .multi()
        .set(recordKey, JSON.stringify(next))
        .exec()
        .catch((err: unknown) => {
          throw refusedOr(err, () => new ChangeUnconfirmedError(id, err));
        });
      if (committed === null) continue; // someone else wrote in between: read again
      await this.#publishChange(id, hash);
      return next;
    }
    throw new Error(`key ${id} is being changed concurrently; try again`);
  }

  async #publishChange(id: string, hash: string): Promise<void> {
    try {
      await this.#client.publish(this.#channel, JSON.stringify({ type: 'changed', key_hash: hash }));
    } catch (err) {
      throw new ChangeNotAnnouncedError(id, err);
    }
  }

  #parseNotice(message: string): string | null {
    try {
      const notice = JSON.parse(message) as { key_hash?: unknown };
      return typeof notice.key_hash === 'string' ? notice.key_hash : null;
    } catch {
      return null;
    }
  }

  #updateHealth(): void {
    const healthy =
      this.#client.status === 'ready' &&
      this.#databaseRefused === undefined &&
      this.#unanswered.size === 0 &&
      (this.#subscriber === undefined || this.#subscribed);
    if (healthy === this.#healthy) return;
    this.#healthy = healthy;
    this.#emit({ type: 'health', healthy });
  }

  #emit(event: Parameters<KeyStoreListener>[0]): void {
    for (const listener of this.#listeners) listener(event);
  }

  #recordKey(hash: string): string {
    return `${this.#prefix}key:${hash}`;
  }

  /**
   * A record's Redis key as errors and logs give it: the hash cut to 12 digits, as `keys list`
   * gives it, since the whole hash is the key's fingerprint (`redis-cli --scan --pattern` finds it).
   */
  #recordName(hash: string): string {
    return `${this.#prefix}key:${hash.slice(0, 12)}…`;
  }

  #idKey(id: string): string {
    return `${this.#prefix}id:${id}`;
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
