import { close, constants, fstat, open, read } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';

const openFd = promisify(open);
const fstatFd = promisify(fstat);
const readFd = promisify(read);
const closeFd = promisify(close);

/** A file's bytes, or that it holds more than was asked for (with its size when it has one to ask). */
export type ReadAtMost = { readonly over: false; readonly bytes: Buffer } | { readonly over: true; readonly size?: number };

export interface ReadAtMostOptions {
  /**
   * How long a named pipe may keep the read waiting: for a writer, and then for its last byte. Set,
   * a character device is refused (its read could not be ended). Unset, a pipe is read for as long
   * as it stays open, and a character device blocking (start-up, the CLI: `<(…)`, a test holding
   * start-up with a FIFO).
   */
  readonly pipeWaitMs?: number;
}

/** A named pipe nobody finished writing within `pipeWaitMs`. */
class PipeWaitExceeded extends Error {
  constructor(waitMs: number) {
    super(`a named pipe that nothing wrote to its end within ${waitMs / 1000} s`);
    this.name = 'PipeWaitExceeded';
  }
}

/**
 * Reads up to `max` bytes of `file`, whatever it is. A named pipe is read through the event loop,
 * never by blocking a thread of libuv's pool: a blocked `open` or `read` there holds a thread until
 * a writer comes, which may be never, and the process's exit waits for every such thread. So the
 * file is opened without blocking (a pipe with no writer yet opens at once) and a pipe goes to a
 * socket reader, which a deadline can end.
 */
export async function readAtMost(file: string, max: number, { pipeWaitMs }: ReadAtMostOptions = {}): Promise<ReadAtMost> {
  let fd = await openFd(file, constants.O_RDONLY | constants.O_NONBLOCK);
  let stats;
  try {
    stats = await fstatFd(fd);
  } catch (err) {
    await closeFd(fd);
    throw err;
  }
  if (stats.isFIFO()) return readPipe(fd, max, pipeWaitMs);
  try {
    if (stats.isFile() && stats.size > max) return { over: true, size: stats.size };
    if (stats.isCharacterDevice()) {
      // A terminal answers a non-blocking read with EAGAIN, and read blocking it holds a thread of
      // the pool with nothing to end the wait: refused where the read must end in time (a reload).
      if (pipeWaitMs !== undefined) throw new Error('a character device (a terminal?): read only at start-up and by the CLI');
      await closeFd(fd);
      fd = -1;
      fd = await openFd(file, constants.O_RDONLY);
    }
    // One byte past the limit, whatever the size said: a file may grow while it is read.
    const bytes = Buffer.alloc(max + 1);
    let length = 0;
    while (length < bytes.length) {
      const { bytesRead } = await readFd(fd, bytes, length, bytes.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return length > max ? { over: true } : { over: false, bytes: bytes.subarray(0, length) };
  } finally {
    if (fd !== -1) await closeFd(fd);
  }
}

/** Reads a pipe to its end, or to `max` + 1 bytes; the socket owns `fd` and closes it. */
function readPipe(fd: number, max: number, waitMs: number | undefined): Promise<ReadAtMost> {
  return new Promise((resolve, reject) => {
    let pipe: net.Socket;
    try {
      pipe = new net.Socket({ fd, readable: true, writable: false });
    } catch (err) {
      close(fd, () => reject(err));
      return;
    }
    const chunks: Buffer[] = [];
    let length = 0;
    const timer = waitMs === undefined ? undefined : setTimeout(() => finish(new PipeWaitExceeded(waitMs)), waitMs);
    function finish(outcome: ReadAtMost | Error): void {
      clearTimeout(timer);
      pipe.destroy();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    }
    pipe.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length > max) finish({ over: true });
    });
    pipe.once('end', () => finish({ over: false, bytes: Buffer.concat(chunks, length) }));
    pipe.once('error', finish);
  });
}
