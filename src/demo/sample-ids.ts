/**
 * @module
 * Record ids of the sample: seeded ones derived from a seed, so tests and the quickstart's banner can
 * name them; created ones fresh, as the live API mints them.
 */
import { createHash, randomUUID } from 'node:crypto';

/** A UUID v4-shaped id (lower-case) that is the same for the same seed on every run. */
export function uuidFrom(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** A fresh random UUID v4 (lower-case), for a record created through the API. */
export const newId = (): string => randomUUID();
