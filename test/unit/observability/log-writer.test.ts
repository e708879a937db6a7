import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { LogWriter, PIPE_BUF } from '../../../src/observability/logger/log-writer.js';
import { tempDir } from '../../helpers/temp-dir.js';

/**
 * A named pipe with both ends non-blocking: a full pipe refuses with EAGAIN instead of blocking a
 * thread, so the writer's retries, its flush timeout and a reader that goes away can all be seen.
 */
function pipe(): { readFd: number; writeFd: number } {
  const fifo = path.join(tempDir('log-writer-'), 'pipe');
  execFileSync('mkfifo', [fifo]);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  return { readFd, writeFd };
}

/** Everything in the pipe now. */
function drain(fd: number): Buffer {
  const chunks: Buffer[] = [];
  const chunk = Buffer.alloc(64 * 1024);
  for (;;) {
    try {
      const n = readSync(fd, chunk);
      if (n === 0) break;
      chunks.push(Buffer.from(chunk.subarray(0, n)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') break;
      throw err;
    }
  }
  return Buffer.concat(chunks);
}

/** 1 MiB in blocks of PIPE_BUF bytes, each block's bytes its own number, so order and completeness show. */
const blocks = Array.from({ length: 256 }, (_, i) => Buffer.alloc(PIPE_BUF, i % 251));

describe('LogWriter', () => {
  it('a full non-blocking pipe: what it refuses is kept, and written in order once there is room', () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    const received: Buffer[] = [];
    // The writer copies what it keeps: the caller may reuse its buffer at once, as the logger does.
    const reused = Buffer.alloc(PIPE_BUF);
    for (const block of blocks) {
      block.copy(reused);
      writer.write(reused);
      reused.fill(0xff);
    }
    expect(writer.retry()).toBe(false); // far more than a pipe holds, and nobody has read yet
    for (let i = 0; i < 1000 && !writer.retry(); i++) received.push(drain(readFd));
    received.push(drain(readFd));
    expect(Buffer.concat(received).equals(Buffer.concat(blocks))).toBe(true);
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('past 4 MiB refused and kept, a write waits for the reader instead of keeping more', async () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    // A reader on another thread (this one waits inside `write`): 64 KiB a millisecond, counting what it took.
    const taken = new Int32Array(new SharedArrayBuffer(4));
    const reader = new Worker(
      `const { readSync } = require('node:fs');
      const { workerData, parentPort } = require('node:worker_threads');
      const pause = new Int32Array(new SharedArrayBuffer(4));
      const chunk = Buffer.alloc(64 * 1024);
      const chunks = [];
      for (;;) {
        let n;
        try { n = readSync(workerData.fd, chunk); } catch (err) { if (err.code !== 'EAGAIN') throw err; n = -1; }
        if (n === 0) break;
        if (n > 0) { chunks.push(Buffer.from(chunk.subarray(0, n))); Atomics.add(workerData.taken, 0, n); }
        Atomics.wait(pause, 0, 0, 1);
      }
      parentPort.postMessage(Buffer.concat(chunks));`,
      { eval: true, workerData: { fd: readFd, taken } },
    );
    const received = new Promise<Buffer>((resolve, reject) => {
      reader.once('message', (bytes: Uint8Array) => resolve(Buffer.from(bytes)));
      reader.once('error', reject);
    });
    const MiB = 1024 * 1024;
    const written = Array.from({ length: 12 * 256 }, (_, i) => Buffer.alloc(PIPE_BUF, i % 251)); // 12 MiB
    let takenWhenWritten: number;
    try {
      for (const block of written) writer.write(block);
      takenWhenWritten = Atomics.load(taken, 0);
      writer.writeAtExit(undefined, 10_000);
    } finally {
      closeSync(writeFd); // the reader's end of file, also when this fails
    }
    expect((await received).equals(Buffer.concat(written))).toBe(true);
    closeSync(readFd);
    // Kept: at most 4 MiB and the last block. The rest is in the pipe (64 KiB here) or already read.
    // Without the wait, all 12 MiB would be written (kept) long before a reader this slow took 8.
    expect(takenWhenWritten).toBeGreaterThanOrEqual(12 * MiB - 4 * MiB - PIPE_BUF - 1 * MiB);
  });

  it('at exit: what is pending, then the last bytes; a reader that does not read is given up on after the patience, between two blocks', () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    for (const block of blocks) writer.write(block);
    writer.writeAtExit(Buffer.from('last\n'), 50); // returns: it gave up, rather than wait for ever
    const inPipe = drain(readFd);
    expect(inPipe.length % PIPE_BUF).toBe(0);
    expect(inPipe.equals(Buffer.concat(blocks).subarray(0, inPipe.length))).toBe(true);
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('at exit with a reader that reads: everything, in order, the last bytes last', () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    writer.write(Buffer.from('first\n'));
    writer.writeAtExit(Buffer.from('last\n'), 1000);
    expect(drain(readFd).toString()).toBe('first\nlast\n');
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('a reader that went away: lines are dropped without an error, and the exit does not wait', () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    closeSync(readFd);
    writer.write(Buffer.from('nobody reads this\n'));
    expect(writer.retry()).toBe(true); // nothing kept for a reader that is gone
    const started = Date.now();
    writer.writeAtExit(Buffer.from('last\n'), 10_000);
    // Not a speed check: whether it waited out its ten seconds of patience for a reader that is gone.
    expect(Date.now() - started).toBeLessThan(5_000);
    closeSync(writeFd);
  });
});
