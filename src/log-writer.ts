import { write, writeSync } from 'node:fs';

/** A descriptor that refused with EAGAIN (non-blocking, its reader behind) is tried again after this long. */
const RETRY_MS = 10;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Writes blocks of log bytes to a file descriptor in order, one asynchronous write at a time (off the
 * request path), and at exit what is left, synchronously. In place of sonic-boom, which pino flushes
 * synchronously at exit: that flush retried a closed pipe (EPIPE, the reader gone) for ever, so the
 * process never ended, and it wrote beside an asynchronous write still under way, so the two writes'
 * bytes interleaved in the pipe and lines came out cut and mixed.
 */
export class LogWriter {
  readonly #fd: number;
  readonly #queue: Buffer[] = [];
  /** An asynchronous write is under way (or waiting to be retried); false means the queue is empty. */
  #writing = false;
  /** The descriptor refused for good (EPIPE: the reader is gone; EBADF): nothing more is written. */
  #broken = false;
  /** A flush gave up on a reader that does not read: the exit must not block on it. */
  #stuck = false;
  readonly #onIdle: (() => void)[] = [];

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** Keeps `bytes` (do not reuse them) until written. */
  write(bytes: Buffer): void {
    if (this.#broken) return;
    this.#queue.push(bytes);
    if (!this.#writing) this.#writeNext();
  }

  /**
   * Resolves true once everything given so far is written; false when the descriptor is broken, or
   * when `timeoutMs` pass first (the reader is not reading).
   */
  flush(timeoutMs: number): Promise<boolean> {
    if (!this.#writing) return Promise.resolve(!this.#broken);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#stuck = true;
        resolve(false);
      }, timeoutMs);
      this.#onIdle.push(() => {
        clearTimeout(timer);
        resolve(!this.#broken);
      });
    });
  }

  /**
   * At exit, when nothing asynchronous runs any more: writes `last` synchronously. Not while an
   * asynchronous write is under way: in a pipe their bytes would interleave, so these lines are lost
   * instead (an exit that waited for `flush` finds none under way). Not when the reader is gone, or
   * did not read during a flush: on a blocking pipe the write would hold the exit for as long as it
   * does not read.
   */
  writeAtExit(last: Buffer, patienceMs: number): void {
    if (this.#writing || this.#broken || this.#stuck) return;
    writeWhole(this.#fd, last, patienceMs);
  }

  readonly #writeNext = (): void => {
    const bytes = this.#queue[0];
    if (bytes === undefined) {
      this.#writing = false;
      this.#stuck = false;
      for (const idle of this.#onIdle.splice(0)) idle();
      return;
    }
    this.#writing = true;
    write(this.#fd, bytes, 0, bytes.length, null, this.#written);
  };

  readonly #written = (err: NodeJS.ErrnoException | null, count: number): void => {
    if (err !== null) {
      if (err.code === 'EAGAIN') return void setTimeout(this.#writeNext, RETRY_MS);
      this.#broken = true;
      this.#queue.length = 0;
    } else {
      const bytes = this.#queue[0]!;
      if (count < bytes.length) this.#queue[0] = bytes.subarray(count);
      else this.#queue.shift();
    }
    this.#writeNext();
  };
}

/**
 * Writes all of `bytes` synchronously. A full non-blocking pipe refuses with EAGAIN: retried every
 * 10 ms until `patienceMs` have passed. Any other failure (the reader gone) ends it.
 */
function writeWhole(fd: number, bytes: Buffer, patienceMs: number): void {
  const deadline = Date.now() + patienceMs;
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += writeSync(fd, bytes, offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() > deadline) return;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}
