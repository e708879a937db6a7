/**
 * @module
 * What a key record means to the request path, built once per read of the record. Every read does
 * the same work whatever the verdict, so that unknown, disabled, wrong-address and valid keys take
 * as long to judge as they take the same bytes to refuse (docs/security.md, "Verdicts in equal time").
 */
import { compileAllowlist, type IpAllowlist } from '../net/ip-allowlist.js';
import type { ApiKeyRecord } from './api-key.js';

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

export const UNKNOWN: KeyVerdict = Object.freeze({ kind: 'unknown' });
export const DISABLED: KeyVerdict = Object.freeze({ kind: 'disabled' });

/**
 * What a store reads in place of a record that is not there, and judges in full: a record of a
 * typical size, with a whitelist, so that "no such key" costs what a key costs.
 */
export const STAND_IN_RECORD_JSON = JSON.stringify({
  id: 'key_00000000000000000000',
  key_hash: '0'.repeat(64),
  acquirer_id: 'stand_in',
  permissions: ['eod_list', 'eod_read', 'merchants_read', 'users_read'],
  allowed_ips: ['192.0.2.0/24', '2001:db8::/32'],
  description: 'not a key: read in place of a missing record',
  created_at: '2026-01-01T00:00:00.000Z',
  disabled_at: null,
} satisfies ApiKeyRecord);
const STAND_IN_RECORD: ApiKeyRecord = JSON.parse(STAND_IN_RECORD_JSON) as ApiKeyRecord;

/** Escapes the optimiser: work whose result nobody reads may be dropped. */
let standInSink: unknown;

function resolvedKey(record: ApiKeyRecord): ResolvedKey {
  return {
    id: record.id,
    acquirerId: record.acquirer_id,
    permissions: new Set(record.permissions),
    allowlist: record.allowed_ips.length === 0 ? null : compileAllowlist(record.allowed_ips),
  };
}

/** The verdict on a record read from the store (null: none). The whitelist is built in every case. */
export function toVerdict(record: ApiKeyRecord | null): KeyVerdict {
  const key = resolvedKey(record ?? STAND_IN_RECORD);
  if (record === null) {
    standInSink = key;
    return UNKNOWN;
  }
  if (record.disabled_at !== null) {
    standInSink = key;
    return DISABLED;
  }
  return { kind: 'valid', key };
}

