import { writeSync } from 'node:fs';

/**
 * A write of at most this many bytes to a pipe is atomic (PIPE_BUF on Linux): it never mixes with
 * another process's writes to the same pipe, and a non-blocking pipe takes all of it or none.
 */
export const PIPE_BUF = 4096;
/**
 * What a non-blocking descriptor refused is kept up to this much; past it, writes wait for the reader
 * as a blocking descriptor makes them wait, rather than hold ever more memory.
 */
const MAX_PENDING_BYTES = 4 * 1024 * 1024;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log bytes to a file descriptor, written synchronously as they are handed over, in order, so an exit
 * of any kind leaves every line whole (sonic-boom's asynchronous writes left lines cut or lost). A
 * non-blocking descriptor's refusals are kept up to MAX_PENDING_BYTES, then waited out as a blocking
 * one would be (docs/operations.md, "Logs").
 */
export class LogWriter {
  readonly #fd: number;
  /** What the descriptor refused, in order; written before anything newer. */
  readonly #pending: Buffer[] = [];
  #pendingBytes = 0;
  /** The descriptor refused for good (EPIPE: the reader is gone; EBADF): nothing more is written. */
  #broken = false;

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** Writes `bytes` now, after anything pending. What is refused is copied: `bytes` may be reused. */
  write(bytes: Buffer): void {
    if (this.#broken) return;
    const written = this.#writePending() ? this.#writeSome(bytes) : 0;
    if (written < bytes.length && !this.#broken) {
      this.#pending.push(Buffer.from(bytes.subarray(written)));
      this.#pendingBytes += bytes.length - written;
    }
    while (this.#pendingBytes > MAX_PENDING_BYTES && !this.#writePending()) Atomics.wait(pause, 0, 0, 1);
  }

  /**
   * Writes `bytes` now, after anything pending, and returns only once all of it is written, waiting
   * for a non-blocking descriptor's reader as a blocking descriptor makes a writer wait: nothing else
   * this process writes to the same pipe (its stderr, when it is the same file) can land inside it.
   */
  writeWhole(bytes: Buffer): void {
    this.write(bytes);
    while (!this.#writePending()) Atomics.wait(pause, 0, 0, 1);
  }

  /** Tries again what was refused; true when nothing is left. */
  retry(): boolean {
    return this.#writePending();
  }

  /**
   * At exit: `last` after what is pending, retrying a full non-blocking pipe every 10 ms for as long
   * as its reader takes something at least every `patienceMs`. Given up on a reader that takes
   * nothing for that long: between two blocks, or inside a line longer than a block.
   */
  writeAtExit(last: Buffer | undefined, patienceMs: number): void {
    if (last !== undefined) this.write(last);
    let left = this.#pendingBytes;
    let deadline = Date.now() + patienceMs;
    while (!this.#writePending()) {
      if (this.#pendingBytes < left) {
        left = this.#pendingBytes;
        deadline = Date.now() + patienceMs;
      } else if (Date.now() > deadline) {
        return;
      }
      Atomics.wait(pause, 0, 0, 10);
    }
  }

  /** True when nothing is pending any more. */
  #writePending(): boolean {
    while (this.#pending.length > 0 && !this.#broken) {
      const bytes = this.#pending[0]!;
      const written = this.#writeSome(bytes);
      this.#pendingBytes -= written;
      if (written < bytes.length) {
        this.#pending[0] = bytes.subarray(written);
        return false;
      }
      this.#pending.shift();
    }
    return true;
  }

  /** Bytes written before the descriptor refused (EAGAIN), or all of them. */
  #writeSome(bytes: Buffer): number {
    let offset = 0;
    while (offset < bytes.length) {
      try {
        offset += writeSync(this.#fd, bytes, offset);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
          this.#broken = true;
          this.#pending.length = 0;
          this.#pendingBytes = 0;
        }
        return offset;
      }
    }
    return offset;
  }
}
