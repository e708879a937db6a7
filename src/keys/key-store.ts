import type { ApiKeyRecord } from './api-key.js';

export interface KeyChanges {
  readonly permissions?: readonly string[];
  readonly allowed_ips?: readonly string[];
}

/** What a store tells the gateways that cache its records. */
export type KeyStoreEvent =
  /** The key with this hash changed (updated or disabled) in some process; when its notice was published (ms since the epoch), if it says. */
  | { readonly type: 'changed'; readonly keyHash: string; readonly publishedAt?: number | undefined }
  /** Change notices may have been missed (the subscription reconnected): trust nothing cached. */
  | { readonly type: 'resync' }
  /**
   * Whether the store can currently answer lookups (`available`; while it cannot, cached keys stand in
   * for the outage grace only) and tell of changes (`notices`; without them, verdicts are trusted briefly).
   */
  | { readonly type: 'health'; readonly available: boolean; readonly notices: boolean };

export type KeyStoreListener = (event: KeyStoreEvent) => void;

/**
 * The store answered, but with a value that is not a key record. Refused like an outage for that
 * key (503), never taken as a key; the store itself is not down.
 */
export class CorruptKeyRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CorruptKeyRecordError';
  }
}

/**
 * What a key command (create, update, disable, …) tells its operator as it is: the message says what
 * happened to the key and what to do next, and carries no secret.
 */
export abstract class KeyCommandError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

const reason = (cause: unknown): string => (cause as Error)?.message ?? String(cause);

export class KeyNotFoundError extends KeyCommandError {
  constructor(id: string) {
    super(`no key with id ${id}`);
  }
}

export class KeyDisabledError extends KeyCommandError {
  constructor(id: string) {
    super(`key ${id} is disabled; disabling is permanent, create a new key instead`);
  }
}

/**
 * The change is written, but running gateways could not be told (the notice was not published):
 * they apply it when their cached copy expires (KEY_CACHE_TTL_MS). Running the command again
 * announces it again.
 */
export class ChangeNotAnnouncedError extends KeyCommandError {
  constructor(id: string, cause: unknown) {
    super(
      `key ${id}: the change is written in Redis, but running gateways could not be told of it (${reason(cause)}); ` +
        'they apply it only when their cached copy expires (KEY_CACHE_TTL_MS): run the same command again to announce it',
      { cause },
    );
  }
}

/**
 * The command that writes the change reached Redis, or may have, but its answer never came back (the
 * connection dropped or timed out after EXEC was sent): the change may be written, and if it is,
 * running gateways were not told of it. Running the same command again is safe, and announces it.
 */
export class ChangeUnconfirmedError extends KeyCommandError {
  constructor(id: string, cause: unknown) {
    super(
      `key ${id}: Redis did not confirm the change (${reason(cause)}); it may be written, and if so ` +
        'running gateways were not told of it and apply it only when their cached copy expires (KEY_CACHE_TTL_MS): run the same command again',
      { cause },
    );
  }
}

/**
 * A key's creation reached Redis, or may have, but its answer never came back: the key may exist,
 * while its secret was never printed and cannot be recovered.
 */
export class CreationUnconfirmedError extends KeyCommandError {
  constructor(id: string, cause: unknown) {
    super(
      `key ${id}: Redis did not confirm the key's creation (${reason(cause)}); it may exist, but its key was ` +
        `not printed and cannot be recovered: if \`keys show ${id}\` finds it, disable it (\`keys disable ${id}\`), and create another`,
      { cause },
    );
  }
}

/**
 * Where key records live. Lookups reject when the store cannot answer (never resolve to a guess);
 * `null` always means "no such key".
 */
export interface KeyStore {
  /** `keyHash`: the presented key's SHA-256 (hashKey); a store with a pepper finds either form of its record. */
  findByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  findById(id: string): Promise<ApiKeyRecord | null>;
  /**
   * All keys, or those of one acquirer, oldest first. Records that cannot be read are reported, not
   * returned: `what` names each for an operator (`sha256 0a1b2c…`, or `id key_…` for an id mapping).
   */
  list(acquirerId?: string, onCorrupt?: (what: string, err: Error) => void): Promise<ApiKeyRecord[]>;
  /** `record.key_hash`: the key's SHA-256; a store with a pepper keeps the record under the peppered form. */
  create(record: ApiKeyRecord): Promise<void>;
  /** Throws KeyNotFoundError, or KeyDisabledError: a disabled key is never changed again. */
  update(id: string, changes: KeyChanges): Promise<ApiKeyRecord>;
  /** Idempotent: disabling a disabled key keeps its first disabled_at. Throws KeyNotFoundError. */
  disable(id: string, at: Date): Promise<ApiKeyRecord>;
  /**
   * Receives every change made through any store sharing this data, in any process, and the
   * store's health: the current health at once, then every change of it.
   */
  watch(listener: KeyStoreListener): () => void;
  close(): Promise<void>;
}
