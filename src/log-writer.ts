import { writeSync } from 'node:fs';

/**
 * A write of at most this many bytes to a pipe is atomic (PIPE_BUF on Linux): it never mixes with
 * another process's writes to the same pipe, and a non-blocking pipe takes all of it or none.
 */
export const PIPE_BUF = 4096;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log bytes to a file descriptor, written synchronously as they are handed over, in order. Nothing
 * is ever under way in the background, so an exit of any kind (a signal, a crash, `process.exit()`)
 * writes what is left whole, after what came before: an asynchronous writer (sonic-boom) left lines
 * cut and mixed, or lost, when the process exited with a write under way.
 *
 * A blocking descriptor (a pipe, as a supervisor gives one) makes the process wait for a reader
 * that is behind, as any program writing to it does. A non-blocking one refuses with EAGAIN: what it
 * refused is copied and kept, and written first at the next write or `retry`.
 */
export class LogWriter {
  readonly #fd: number;
  /** What the descriptor refused, in order; written before anything newer. */
  readonly #pending: Buffer[] = [];
  /** The descriptor refused for good (EPIPE: the reader is gone; EBADF): nothing more is written. */
  #broken = false;

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** Writes `bytes` now, after anything pending. What is refused is copied: `bytes` may be reused. */
  write(bytes: Buffer): void {
    if (this.#broken) return;
    const written = this.#writePending() ? this.#writeSome(bytes) : 0;
    if (written < bytes.length && !this.#broken) this.#pending.push(Buffer.from(bytes.subarray(written)));
  }

  /** Tries again what was refused; true when nothing is left. */
  retry(): boolean {
    return this.#writePending();
  }

  /**
   * At exit: `last` after what is pending, retrying a full non-blocking pipe every 10 ms for up to
   * `patienceMs`, then giving up (between two blocks, never inside one of at most PIPE_BUF bytes).
   */
  writeAtExit(last: Buffer | undefined, patienceMs: number): void {
    if (last !== undefined) this.write(last);
    const deadline = Date.now() + patienceMs;
    while (!this.#writePending() && Date.now() < deadline) Atomics.wait(pause, 0, 0, 10);
  }

  /** True when nothing is pending any more. */
  #writePending(): boolean {
    while (this.#pending.length > 0 && !this.#broken) {
      const bytes = this.#pending[0]!;
      const written = this.#writeSome(bytes);
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
        }
        return offset;
      }
    }
    return offset;
  }
}
