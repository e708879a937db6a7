/** What a line let through says of its kind's lines held back since the one before it. */
export interface HeldBack {
  /** Lines of this kind not written since the last one that was (0: none). */
  readonly count: number;
  /** How long ago that last line was written, in whole ms; null when none was. */
  readonly lastWrittenMsAgo: number | null;
}

/**
 * The one rule for log lines a flood could repeat without end: a line of each kind (a string the
 * caller chooses) is written at most once every `everyMs`, and the one written says how many were
 * held back before it and when the one before them was, so nothing is lost but repetition.
 * `remembered` bounds the kinds kept at once (more, each one different, start the memory over);
 * `now`: milliseconds on a monotonic clock.
 */
export function lineThrottle(everyMs: number, { remembered = 256, now = () => performance.now() }: { remembered?: number; now?: () => number } = {}) {
  const last = new Map<string, { at: number; held: number }>();
  /** null: hold this line back. Otherwise write it, with what it says of those held back. */
  return function pass(kind: string): HeldBack | null {
    const at = now();
    const before = last.get(kind);
    if (before !== undefined && at - before.at < everyMs) {
      before.held++;
      return null;
    }
    if (before === undefined && last.size >= remembered) last.clear();
    last.set(kind, { at, held: 0 });
    return { count: before?.held ?? 0, lastWrittenMsAgo: before === undefined ? null : Math.round(at - before.at) };
  };
}
