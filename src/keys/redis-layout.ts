/**
 * @module
 * What the gateway keeps in Redis, under REDIS_KEY_PREFIX: `key:<hash>` → the record (JSON),
 * `id:<id>` → the hash, `ids` → the set of ids, `peppered` → the ids whose record is stored under
 * the peppered hash (key-hash.ts), the channel of change notices, and the rate limits' own:
 * `instances` (the live gateways) and `rate:<id>:<budget>` (a budget's TAT). A record read
 * back is checked as strictly as when it was written.
 */
import { z } from 'zod';
import { parseCidr } from '../net/ip-allowlist.js';
import { isValidAcquirerId, KEY_ID, type ApiKeyRecord } from './api-key.js';
import { CorruptKeyRecordError } from './key-store.js';

const recordSchema = z.strictObject({
  id: z.string().regex(KEY_ID),
  key_hash: z.string().regex(/^[0-9a-f]{64}$/),
  // What the request path relies on is checked as strictly as when it was written: the acquirer id
  // becomes a header value, and a whitelist entry that does not parse must not become "any address".
  acquirer_id: z.string().refine(isValidAcquirerId),
  permissions: z.array(z.string()),
  allowed_ips: z.array(
    z.string().refine((cidr) => {
      const parsed = parseCidr(cidr);
      return parsed.ok && parsed.cidr === cidr;
    }),
  ),
  description: z.string(),
  created_at: z.string(),
  disabled_at: z.string().nullable(),
});

/** A stored record, or null for none; `name`: the record's Redis key as messages give it (recordName). */
export function parseRecord(raw: string | null, name: string): ApiKeyRecord | null {
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

/** What an id maps to: the name of its key record, the key's hash in either form (64 lower-case hex digits). */
export const KEY_HASH = /^[0-9a-f]{64}$/;

/** The names of the keys and channel under one prefix and database. */
export class RedisLayout {
  readonly prefix: string;
  /**
   * The channel of change notices. Pub/sub ignores Redis's numbered databases: without the number,
   * two environments kept apart by database (`redis://redis/2`, `redis://redis/3`) under the same
   * prefix would hear each other's notices. Database 0 keeps the plain name.
   */
  readonly channel: string;
  readonly ids: string;
  /** The ids stored peppered: created with KEY_HASH_PEPPER, or moved by `keys rehash`. */
  readonly peppered: string;
  /** The change counter (change-counter.ts). */
  readonly version: string;
  /** The live gateways, by when each last said so (limits/instance-count.ts). */
  readonly instances: string;

  constructor(prefix: string, db: number) {
    this.prefix = prefix;
    this.channel = db === 0 ? `${prefix}events` : `${prefix}events:${db}`;
    this.ids = `${prefix}ids`;
    this.peppered = `${prefix}peppered`;
    this.version = `${prefix}version`;
    this.instances = `${prefix}instances`;
  }

  /** A key's budget with RATE_LIMIT_STORE=redis (limits/redis-rate-limiter.ts): its TAT, expiring when whole. */
  rateBudget(keyId: string, budget: string): string {
    return `${this.prefix}rate:${keyId}:${budget}`;
  }

  recordKey(hash: string): string {
    return `${this.prefix}key:${hash}`;
  }

  /**
   * A record's Redis key as errors and logs give it: the hash cut to 12 digits, as `keys list`
   * gives it, since the whole hash is the key's fingerprint (`redis-cli --scan --pattern` finds it).
   */
  recordName(hash: string): string {
    return `${this.prefix}key:${hash.slice(0, 12)}…`;
  }

  idKey(id: string): string {
    return `${this.prefix}id:${id}`;
  }

  /** A change notice: `{"type":"changed","key_hash":…,"published_at":<ms since the epoch>,"version":<the change counter>}`. */
  notice(hash: string, publishedAt: number, version: number | undefined): string {
    return JSON.stringify({ type: 'changed', key_hash: hash, published_at: publishedAt, ...(version === undefined ? {} : { version }) });
  }

  /**
   * The key hash a notice names, and when it was published (when it says, as notices of older
   * commands do not), or null for one that names none (taken as "anything may have changed").
   */
  parseNotice(message: string): { keyHash: string; publishedAt: number | undefined; version: number | undefined } | null {
    try {
      const notice = JSON.parse(message) as { key_hash?: unknown; published_at?: unknown; version?: unknown };
      if (typeof notice.key_hash !== 'string') return null;
      return {
        keyHash: notice.key_hash,
        publishedAt: Number.isFinite(notice.published_at) ? (notice.published_at as number) : undefined,
        version: Number.isSafeInteger(notice.version) ? (notice.version as number) : undefined,
      };
    } catch {
      return null;
    }
  }
}
