import type { IncomingMessage } from 'node:http';
import type { CollectYoung } from '../node-internals/young-collection.js';

/**
 * Why this exists: every socket read of an upstream body is a new buffer of up to 64 KiB outside
 * V8's heap, and V8 frees a dead one only when it collects. A streamed body allocates almost no
 * JavaScript, so nothing prompts a collection until about 64 MiB of dead buffers have piled up, and
 * the allocator keeps those pages: a 1 GiB download grew the process by 80 to 100 MiB. A young-
 * generation collection after every few MiB streamed (a fraction of a millisecond with the capped
 * young generation of the shebang) frees them while they are few, and the reused memory is still in
 * the cache, so large downloads also got faster (bench/RESULTS.md).
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
