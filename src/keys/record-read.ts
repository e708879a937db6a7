/**
 * @module
 * A lookup that reads a key's record in both its forms (key-hash.ts) in one round trip: two GETs
 * pipelined (in a Cluster the prefix's hash tag puts both in one slot). GET, not MGET: MGET answers
 * nil for a value of another type, which must be refused as unreadable, not taken for no key.
 */
import type { Cluster, Redis } from 'ioredis';
import { CorruptKeyRecordError } from './key-store.js';
import type { RedisLayout } from './redis-layout.js';

/** The first of `hashes` whose record exists, and its raw value; none: the last hash and null. */
export async function readFirstRecord(client: Redis | Cluster, layout: RedisLayout, hashes: readonly string[]): Promise<{ raw: string | null; hash: string }> {
  const pipeline = client.pipeline();
  for (const hash of hashes) pipeline.get(layout.recordKey(hash));
  const results = (await pipeline.exec()) ?? [];
  if (results.length !== hashes.length) throw new Error('Redis answered a pipelined lookup only in part');
  for (const [i, [err]] of results.entries()) {
    if (err === null) continue;
    if (err.message.startsWith('WRONGTYPE')) throw new CorruptKeyRecordError(`${layout.recordName(hashes[i]!)} is not a string value`);
    throw err;
  }
  const found = results.findIndex(([, raw]) => raw !== null);
  return found < 0 ? { raw: null, hash: hashes.at(-1)! } : { raw: results[found]![1] as string, hash: hashes[found]! };
}
