import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LogWriter } from '../../src/log-writer.js';

/**
 * A named pipe with both ends non-blocking: a full pipe refuses with EAGAIN instead of blocking a
 * thread, so the writer's retries, its flush timeout and a reader that goes away can all be seen.
 */
function pipe(): { readFd: number; writeFd: number } {
  const fifo = path.join(mkdtempSync(path.join(tmpdir(), 'log-writer-')), 'pipe');
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

/** Reads as the writer goes until it has written everything (or 10 s pass); returns what was read. */
async function readUntilFlushed(writer: LogWriter, readFd: number): Promise<{ flushed: boolean | undefined; received: Buffer }> {
  const received: Buffer[] = [];
  let flushed: boolean | undefined;
  void writer.flush(10_000).then((result) => (flushed = result));
  const deadline = Date.now() + 10_000;
  while (flushed === undefined && Date.now() < deadline) {
    received.push(drain(readFd));
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  received.push(drain(readFd));
  return { flushed, received: Buffer.concat(received) };
}

/** 1 MiB in 16 KiB blocks, each block's bytes its own number, so order and completeness show. */
const blocks = Array.from({ length: 64 }, (_, i) => Buffer.alloc(16 * 1024, i));

describe('LogWriter', () => {
  it('writes every block in order through a pipe that keeps filling up, and flush says when it is all out', async () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    for (const block of blocks) writer.write(block);
    // Far more than a pipe holds: the writer meets EAGAIN and tries again as the reader makes room.
    const { flushed, received } = await readUntilFlushed(writer, readFd);
    expect(flushed).toBe(true);
    expect(received.equals(Buffer.concat(blocks))).toBe(true);
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('a flush gives up on a reader that does not read, and the exit then writes nothing rather than wait on it', async () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    for (const block of blocks) writer.write(block);
    expect(await writer.flush(50)).toBe(false);
    // Room in the pipe again, but a write is under way: the exit must not put its bytes beside it.
    const first = drain(readFd);
    writer.writeAtExit(Buffer.from('last\n'), 1000);
    const { flushed, received } = await readUntilFlushed(writer, readFd);
    expect(flushed).toBe(true);
    expect(Buffer.concat([first, received]).equals(Buffer.concat(blocks))).toBe(true);
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('at exit with nothing under way, writes the last bytes synchronously', async () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    writer.write(Buffer.from('first\n'));
    expect(await writer.flush(1000)).toBe(true);
    writer.writeAtExit(Buffer.from('last\n'), 1000);
    expect(drain(readFd).toString()).toBe('first\nlast\n');
    closeSync(readFd);
    closeSync(writeFd);
  });

  it('a reader that went away: flush resolves false at once, and later lines are dropped without an error', async () => {
    const { readFd, writeFd } = pipe();
    const writer = new LogWriter(writeFd);
    closeSync(readFd);
    writer.write(Buffer.from('nobody reads this\n'));
    expect(await writer.flush(10_000)).toBe(false);
    writer.write(Buffer.from('nor this\n'));
    expect(await writer.flush(10_000)).toBe(false);
    writer.writeAtExit(Buffer.from('last\n'), 1000);
    closeSync(writeFd);
  });
});
