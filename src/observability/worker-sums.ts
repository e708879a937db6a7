import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** One process's metrics, as prom-client's `getMetricsAsJSON` gives them. */
export type WorkerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/** Metric types whose values only grow (prom-client's declarations type them as numbers; they are these strings). */
const MONOTONIC_TYPES: ReadonlySet<string> = new Set(['counter', 'histogram']);

const monotonic = (metrics: WorkerMetrics): WorkerMetrics => metrics.filter((m) => MONOTONIC_TYPES.has(String(m.type)));

/**
 * The workers' metrics (WORKERS above 1), kept so that their sums do not go backwards. Each live
 * worker's last answer is kept: a worker that does not answer a scrape in time (hung, or leaving)
 * counts with the counters and histograms of it, and when a worker dies they stay in the sums for
 * good. Gauges come only from workers that answered: an old one would describe a worker as it was (a
 * frozen event-loop lag, a key store state long past). Without this, a dead or late worker's share
 * vanished, which Prometheus reads as a counter reset and `rate()` as a spike. What a worker counted
 * after its last answer is lost.
 */
export class WorkerSums<W extends object> {
  readonly #last = new Map<W, WorkerMetrics>();
  /** Workers retired: an answer of theirs that arrives later is already in `#retired`, as their last. */
  readonly #gone = new WeakSet<W>();
  #retired: Promise<WorkerMetrics> = Promise.resolve([]);
  readonly #onRetireError: (err: unknown, worker: W) => void;

  constructor(onRetireError: (err: unknown, worker: W) => void) {
    this.#onRetireError = onRetireError;
  }

  /**
   * A worker's answer to a scrape. Returns false, and keeps nothing, for a worker already retired: it
   * answered and then exited while the others were still answering, and its previous answer is in the
   * retired sums; this one as well would count it twice.
   */
  answered(worker: W, metrics: WorkerMetrics): boolean {
    if (this.#gone.has(worker)) return false;
    this.#last.set(worker, metrics);
    return true;
  }

  /** A worker has died: its last counters and histograms stay in the sums for good. */
  retire(worker: W): void {
    this.#gone.add(worker);
    const last = this.#last.get(worker);
    this.#last.delete(worker);
    if (last === undefined) return;
    this.#retired = this.#retired.then(async (sofar) => {
      try {
        return (await AggregatorRegistry.aggregate([sofar, monotonic(last)]).getMetricsAsJSON()) as WorkerMetrics;
      } catch (err) {
        this.#onRetireError(err, worker);
        return sofar;
      }
    });
  }

  /**
   * What to sum for one scrape: each live worker with an answer so far, in full if it answered this
   * scrape (`fresh`) and by its counters and histograms if not, and the retired workers' sums.
   */
  async parts(fresh: ReadonlySet<W>): Promise<WorkerMetrics[]> {
    const current = [...this.#last].map(([worker, metrics]) => (fresh.has(worker) ? metrics : monotonic(metrics)));
    return [...current, await this.#retired];
  }
}
