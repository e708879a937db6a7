/** A worker that dies within this long of listening most likely died of something its replacement will meet too. */
const QUICK_DEATH_MS = 10_000;
const FIRST_PAUSE_MS = 1_000;
const MAX_PAUSE_MS = 30_000;

/**
 * How long the primary waits before replacing a worker that died. Replaced at once every time, a
 * worker that crashes soon after it starts (on the first request a health check sends, say) would be
 * forked again as fast as it can start, each start costing a core and a burst of error lines. So
 * after consecutive quick deaths the pause doubles, 1 s, 2 s, 4 s … up to 30 s; a worker that died
 * after serving longer than the quick window resets it, and is replaced at once.
 */
export class RestartPacer {
  private quickDeaths = 0;

  /** Milliseconds to wait before replacing a worker that died `livedMs` after it began listening. */
  pauseAfter(livedMs: number): number {
    if (livedMs >= QUICK_DEATH_MS) {
      this.quickDeaths = 0;
      return 0;
    }
    this.quickDeaths++;
    return Math.min(FIRST_PAUSE_MS * 2 ** (this.quickDeaths - 1), MAX_PAUSE_MS);
  }
}
