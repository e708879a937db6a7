import type { IncomingMessage } from 'node:http';
import type { CollectYoung } from '../node-internals/young-collection.js';

/**
 * @module
 * Every socket read of an upstream body is a buffer outside V8's heap that V8 frees only when it
 * collects, and a streamed body allocates almost no JavaScript to prompt a collection: dead buffers
 * pile up. A young-generation collection every few MiB streamed frees them while they are few (the
 * figure: docs/performance.md).
 */

/** Bytes streamed, over all responses, between two collections. */
export const COLLECT_EVERY_BYTES = 4 * 1024 * 1024;

/** A body that fits in one socket read leaves no pile behind; it is not counted. */
const COUNT_FROM_BYTES = 64 * 1024;

/**
 * Returns `watch(body)`: counts the bytes of an upstream body being streamed to a client (a declared
 * length under 64 KiB is skipped) and runs `collect` each time `everyBytes` more have passed.
 */
export function createStreamedMemory(collect: CollectYoung, everyBytes = COLLECT_EVERY_BYTES): (body: IncomingMessage) => void {
  let sinceCollect = 0;
  const count = (chunk: Buffer) => {
    sinceCollect += chunk.length;
    if (sinceCollect >= everyBytes) {
      sinceCollect = 0;
      collect();
    }
  };
  return (body) => {
    // NaN when there is no Content-Length (chunked): counted, its size is unknown.
    if (Number(body.headers['content-length']) < COUNT_FROM_BYTES) return;
    body.on('data', count);
  };
}
