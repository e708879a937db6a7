/**
 * @module
 * `keys rehash`: moves each record still stored under its plain hash to its peppered hash
 * (key-hash.ts), one key at a time, each in one script: an interruption leaves every key readable
 * in one form or the other, and a second run skips the ids already moved (the `peppered` set).
 * Running gateways need no notice: the record says the same, and they read both forms.
 */
import type { ApiKeyRecord } from './api-key.js';
import type { KeyHashing } from './key-hash.js';
import { CorruptKeyRecordError } from './key-store.js';
import type { RedisConnections } from './redis-connections.js';
import { KEY_HASH, parseRecord, type RedisLayout } from './redis-layout.js';

const MAX_ATTEMPTS = 10;

/**
 * KEYS: the id mapping, the plain record, the peppered record, the `peppered` set. ARGV: the plain
 * hash, the record as read, the record under its new hash, the peppered hash, the id. Moves the
 * record only if neither the mapping nor the record changed since they were read (0: read again).
 */
export const REHASH_SCRIPT = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[4], ARGV[5])
redis.call('DEL', KEYS[2])
return 1`;

export interface RehashOutcome {
  readonly migrated: number;
  /** Created peppered, or moved by an earlier run. */
  readonly alreadyPeppered: number;
  /** Records that could not be read, and were left as they are. */
  readonly unreadable: number;
}

type Moved = 'migrated' | 'unreadable' | 'gone';

/** Every id in `ids` not yet in `peppered`, moved in turn; unreadable ones are named to `onCorrupt` as `keys list` names them. */
export async function rehashRecords(connections: RedisConnections, layout: RedisLayout, hashing: KeyHashing, onCorrupt: (what: string, err: Error) => void): Promise<RehashOutcome> {
  if (!hashing.peppered) throw new Error('keys rehash needs KEY_HASH_PEPPER');
  const [ids, done] = await Promise.all([connections.client.smembers(layout.ids), connections.client.smembers(layout.peppered)]);
  const already = new Set(done);
  let migrated = 0;
  let unreadable = 0;
  for (const id of ids.sort()) {
    if (already.has(id)) continue;
    const outcome = await moveOne(connections, layout, hashing, id, onCorrupt);
    if (outcome === 'migrated') migrated++;
    if (outcome === 'unreadable') unreadable++;
  }
  return { migrated, alreadyPeppered: ids.filter((id) => already.has(id)).length, unreadable };
}

async function moveOne(connections: RedisConnections, layout: RedisLayout, hashing: KeyHashing, id: string, onCorrupt: (what: string, err: Error) => void): Promise<Moved> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const plain = await connections.client.get(layout.idKey(id));
    if (plain === null) return 'gone'; // an id without a mapping: nothing to move (`keys list` skips it too)
    if (!KEY_HASH.test(plain)) {
      onCorrupt(`id ${id}`, new CorruptKeyRecordError(`${layout.idKey(id)} does not hold a key hash`));
      return 'unreadable';
    }
    const recordKey = layout.recordKey(plain);
    const writer = await connections.writer(recordKey);
    let raw: string | null = null;
    let record: ApiKeyRecord | null;
    try {
      raw = await writer.get(recordKey).catch((err: Error) => {
        throw err.message.startsWith('WRONGTYPE') ? new CorruptKeyRecordError(`${layout.recordName(plain)} is not a string value`) : err;
      });
      record = parseRecord(raw, layout.recordName(plain));
      if (record === null || record.key_hash !== plain) throw new CorruptKeyRecordError(`${layout.recordName(plain)}: no record for id ${id} under its hash`);
    } catch (err) {
      if (!(err instanceof CorruptKeyRecordError)) throw err; // Redis could not be used: the run stops here
      onCorrupt(`sha256 ${plain.slice(0, 12)}…`, err as Error);
      return 'unreadable';
    }
    const peppered = hashing.stored(plain);
    const next = JSON.stringify({ ...record, key_hash: peppered } satisfies ApiKeyRecord);
    let moved: unknown;
    try {
      moved = await writer.eval(REHASH_SCRIPT, 4, layout.idKey(id), recordKey, layout.recordKey(peppered), layout.peppered, plain, raw!, next, peppered, id);
    } catch (err) {
      if (await connections.redirected(err)) continue;
      throw err;
    }
    if (moved === 1) return 'migrated';
  }
  throw new Error(`key ${id} is being changed concurrently; run keys rehash again`);
}
