/**
 * Counts, for each worker, the primary's questions in a row it has left unanswered, and names the
 * workers that have let `allowed` go by: stuck, to be killed. Missed questions, not the time since
 * the last answer: a primary frozen itself (a paused container, a debugger) finds, when it resumes,
 * at most the one question it had out late, and kills nobody for it (`allowed` is at least 2).
 */
export class UnansweredQuestions<W> {
  readonly #allowed: number;
  readonly #missed = new Map<W, number>();

  constructor(allowed: number) {
    this.#allowed = Math.max(2, allowed);
  }

  /** After one round of questions: the workers that have now missed `allowed` in a row, each named once. */
  record(round: Iterable<{ readonly worker: W; readonly answered: boolean }>): W[] {
    const stuck: W[] = [];
    for (const { worker, answered } of round) {
      const missed = answered ? 0 : (this.#missed.get(worker) ?? 0) + 1;
      if (missed < this.#allowed) {
        this.#missed.set(worker, missed);
        continue;
      }
      this.#missed.delete(worker);
      stuck.push(worker);
    }
    return stuck;
  }

  /** A worker that is gone. */
  forget(worker: W): void {
    this.#missed.delete(worker);
  }

  get allowed(): number {
    return this.#allowed;
  }
}
