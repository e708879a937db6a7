import { hash, randomBytes } from 'node:crypto';

/** What the key store keeps for a key. The raw key is never part of it, only a hash of it. */
export interface ApiKeyRecord {
  /** Public identifier: safe to log, print and pass to `keys` commands. */
  readonly id: string;
  /** SHA-256 (hex) of the whole key string, prefix included; or its peppered form (key-hash.ts), the record's name either way. */
  readonly key_hash: string;
  readonly acquirer_id: string;
  readonly permissions: readonly string[];
  /** Canonical CIDRs; empty means any address. */
  readonly allowed_ips: readonly string[];
  readonly description: string;
  /** ISO 8601 UTC. */
  readonly created_at: string;
  /** ISO 8601 UTC; set once and never cleared: disabling is permanent. */
  readonly disabled_at: string | null;
}

/** What `keys` commands print: the record without its hash. */
export type PublicKeyRecord = Omit<ApiKeyRecord, 'key_hash'>;

export const KEY_PREFIX = 'acquirer_key_';
const KEY_RANDOM_BYTES = 32;
/** base64url of 32 bytes is 43 characters; longer keys are accepted for keys minted elsewhere. */
const KEY_FORMAT = /^acquirer_key_[A-Za-z0-9_-]{43,128}$/;

/** A new key: the prefix and 32 bytes from the CSPRNG, base64url (RFC 4648 §5, URL-safe). */
export function generateKey(): string {
  return KEY_PREFIX + randomBytes(KEY_RANDOM_BYTES).toString('base64url');
}

/** A key id as `keys create` makes them (and as any record's must be: it travels as a header value when requests are signed). */
export const KEY_ID = /^key_[A-Za-z0-9_-]{1,32}$/;

export function generateKeyId(): string {
  return 'key_' + randomBytes(10).toString('hex');
}

/** Whether a bearer token has the form of an acquirer key; anything else is refused without a lookup. */
export function isWellFormedKey(token: string): boolean {
  return KEY_FORMAT.test(token);
}

/** Once per request: the one-shot `hash` costs half what a `Hash` object does. */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function toPublicRecord(record: ApiKeyRecord): PublicKeyRecord {
  const { key_hash: _hash, ...rest } = record;
  return rest;
}

const ACQUIRER_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Acquirer ids travel upstream as a header value, so they are restricted to a safe token alphabet. */
export function isValidAcquirerId(id: string): boolean {
  return ACQUIRER_ID.test(id);
}
