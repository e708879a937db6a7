/**
 * @module
 * The two forms a key's hash takes in the store (docs/security.md, "Key hashes and the pepper"):
 * plain, SHA-256 of the key (api-key.ts hashKey), and peppered, HMAC-SHA256 keyed with
 * KEY_HASH_PEPPER over the plain hash's 64 hex digits. The peppered form is a function of the
 * plain one, so `keys rehash` migrates stored records without the keys themselves.
 */
import { createHmac } from 'node:crypto';

/** The peppered form of a plain hash (hex). */
export function pepperedHash(pepper: string, plainHash: string): string {
  return createHmac('sha256', pepper).update(plainHash).digest('hex');
}

/**
 * What a process with (or without) a pepper makes of the presented key's plain hash: the form it
 * writes and caches by, and the forms a lookup reads, best first.
 * @example new KeyHashing(config.keyHashPepper).lookup(hashKey(token)) // [peppered, plain]
 */
export class KeyHashing {
  readonly #pepper: string | undefined;

  /** `pepper`: KEY_HASH_PEPPER; empty or none means plain hashes only, as before. */
  constructor(pepper?: string) {
    this.#pepper = pepper === '' ? undefined : pepper;
  }

  get peppered(): boolean {
    return this.#pepper !== undefined;
  }

  /** The form a new record is stored under, and a verdict cached by. */
  stored(plainHash: string): string {
    return this.#pepper === undefined ? plainHash : pepperedHash(this.#pepper, plainHash);
  }

  /** The record names a lookup reads, best first: the peppered form wins over the plain one. */
  lookup(plainHash: string): readonly string[] {
    return this.#pepper === undefined ? [plainHash] : [pepperedHash(this.#pepper, plainHash), plainHash];
  }

  /**
   * The cache entries a change notice for `noticeHash` (a record's key_hash, in either form) may
   * concern: itself, and, with a pepper, its peppered form (the notice named the plain one).
   */
  affected(noticeHash: string): readonly string[] {
    return this.#pepper === undefined ? [noticeHash] : [noticeHash, pepperedHash(this.#pepper, noticeHash)];
  }
}
