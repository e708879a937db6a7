/**
 * @module
 * The primary's questions to its workers (readiness, metrics), each answered by id or given up on.
 */
import type { Worker } from 'node:cluster';
import { TAG, type Answer, type Message } from './ipc.js';

/** A worker that does not answer in this time counts as not ready, and with its last metrics. */
const ASK_TIMEOUT_MS = 1_000;

export interface Answered {
  readonly worker: Worker;
  /** null: no answer came in time. */
  readonly answer: Answer | null;
}

export class WorkerQuestions {
  readonly #pending = new Map<number, (answer: Answer) => void>();
  #lastId = 0;

  /** Asks each of `workers`; resolves to each one asked, with its answer, or null when none came in time. */
  ask(workers: readonly Worker[], type: 'readiness' | 'metrics'): Promise<Answered[]> {
    return Promise.all(workers.map((worker) => this.#askOne(worker, type)));
  }

  /** An `answer` message from a worker. */
  answered(answer: Answer): void {
    this.#pending.get(answer.id)?.(answer);
  }

  #askOne(worker: Worker, type: 'readiness' | 'metrics'): Promise<Answered> {
    return new Promise((resolve) => {
      const id = ++this.#lastId;
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        resolve({ worker, answer: null });
      }, ASK_TIMEOUT_MS);
      this.#pending.set(id, (answer) => {
        clearTimeout(timer);
        this.#pending.delete(id);
        resolve({ worker, answer });
      });
      worker.send({ tag: TAG, type, id } satisfies Message);
    });
  }
}
