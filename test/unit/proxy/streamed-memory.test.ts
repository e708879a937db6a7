import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { createStreamedMemory } from '../../../src/proxy/streamed-memory.js';

/** A stand-in for an upstream response: a stream with headers, flowing as a pipe would make it. */
function body(headers: Record<string, string>): PassThrough & IncomingMessage {
  const stream = Object.assign(new PassThrough(), { headers }) as PassThrough & IncomingMessage;
  stream.resume();
  return stream;
}

const KiB = 1024;

async function stream(target: PassThrough, chunks: number, size: number): Promise<void> {
  for (let i = 0; i < chunks; i++) target.write(Buffer.alloc(size));
  target.end();
  await new Promise((resolve) => target.once('end', resolve));
}

describe('createStreamedMemory', () => {
  it('collects once per everyBytes streamed, counted across bodies', async () => {
    let collections = 0;
    const watch = createStreamedMemory(() => collections++, 256 * KiB);
    const first = body({});
    watch(first);
    await stream(first, 3, 64 * KiB); // 192 KiB: not yet
    expect(collections).toBe(0);
    const second = body({ 'content-length': String(6 * 64 * KiB) });
    watch(second);
    await stream(second, 6, 64 * KiB); // 576 KiB in all: two collections, 64 KiB carried over
    expect(collections).toBe(2);
  });

  it('does not count a body declared under 64 KiB', async () => {
    let collections = 0;
    const watch = createStreamedMemory(() => collections++, 1);
    const small = body({ 'content-length': String(64 * KiB - 1) });
    watch(small);
    await stream(small, 1, 64 * KiB - 1);
    expect(collections).toBe(0);
    const declared = body({ 'content-length': String(64 * KiB) });
    watch(declared);
    await stream(declared, 1, 64 * KiB);
    expect(collections).toBe(1);
  });
});
