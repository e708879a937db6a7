import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

/** One process's metrics, as prom-client's `getMetricsAsJSON` gives them. */
export type WorkerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/** Metric types whose values only grow (prom-client's declarations type them as numbers; they are these strings). */
const MONOTONIC_TYPES: ReadonlySet<string> = new Set(['counter', 'histogram']);

const monotonic = (metrics: WorkerMetrics): WorkerMetrics => metrics.filter((m) => MONOTONIC_TYPES.has(String(m.type)));

/**
 * The workers' metrics (WORKERS above 1), summed so that counters never go backwards: a worker late to
 * a scrape, or dead, counts with its last answer (Prometheus would read its vanishing as a reset).
 * Gauges come only from workers that answered. See docs/operations.md, "Every core".
 */
export class WorkerSums<W extends object> {
  /** Each live worker's newest answer, with the number of the question it answered (questions are numbered in the order asked). */
  readonly #last = new Map<W, { readonly question: number; readonly metrics: WorkerMetrics }>();
  /** Each counter and histogram series as last shown: never shown lower (see `scrape`). */
  readonly #shown = new Map<string, number>();
  /** Workers retired: an answer of theirs that arrives later is already in `#retired`, as their last. */
  readonly #gone = new WeakSet<W>();
  #retired: Promise<WorkerMetrics> = Promise.resolve([]);
  readonly #onRetireError: (err: unknown, worker: W) => void;

  constructor(onRetireError: (err: unknown, worker: W) => void) {
    this.#onRetireError = onRetireError;
  }

  /**
   * A worker's answer to a scrape's `question`. Returns false, and keeps nothing, for a worker already
   * retired: it answered and then exited while the others were still answering, and its previous
   * answer is in the retired sums; this one as well would count it twice. An answer to an earlier
   * question than the one kept is not kept: two scrapes overlap when one waits for a worker that hangs,
   * and the later one, finished first, has the newer answer.
   */
  answered(worker: W, metrics: WorkerMetrics, question: number): boolean {
    if (this.#gone.has(worker)) return false;
    if ((this.#last.get(worker)?.question ?? -Infinity) < question) this.#last.set(worker, { question, metrics });
    return true;
  }

  /** A worker has died: its last counters and histograms stay in the sums for good. */
  retire(worker: W): void {
    this.#gone.add(worker);
    const last = this.#last.get(worker)?.metrics;
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
   * One scrape's sums, with `others` (the primary's own metrics): live workers in full if they answered
   * (`fresh`), by their counters and histograms if not, and the retired ones. No series shows below an
   * earlier scrape: fractions summed in another order can come out a last digit lower, a reset to Prometheus.
   */
  async scrape(fresh: ReadonlySet<W>, others: readonly WorkerMetrics[] = []): Promise<Registry> {
    const current = [...this.#last].map(([worker, { metrics }]) => (fresh.has(worker) ? metrics : monotonic(metrics)));
    const summed = (await AggregatorRegistry.aggregate([...current, await this.#retired, ...others]).getMetricsAsJSON()) as WorkerMetrics;
    for (const metric of monotonic(summed)) {
      for (const series of metric.values) {
        const id = seriesId(metric.name, series);
        const shown = this.#shown.get(id);
        if (shown !== undefined && series.value < shown) (series as { value: number }).value = shown;
        else this.#shown.set(id, series.value);
      }
    }
    return AggregatorRegistry.aggregate([summed]);
  }
}

/** A series by its metric, its sample name (a histogram's `_bucket`, `_sum`, `_count`) and its labels, in any order. */
function seriesId(metric: string, series: MetricValue<string>): string {
  const labels = Object.entries(series.labels)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `${name}=${JSON.stringify(value)}`);
  return `${metric}\0${(series as { metricName?: string }).metricName ?? ''}\0${labels.join(',')}`;
}
