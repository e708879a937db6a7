import { Counter, type CounterConfiguration, type Metric, type Registry } from 'prom-client';

/**
 * Counters and histograms for the request path. prom-client validates and hashes the labels on every
 * call, which came to several µs per request over the four or five calls each one makes; these count
 * into plain numbers, keyed by the label values, and give prom-client the totals when it is scraped.
 * What /metrics shows (and what the primary sums over workers) is exactly what prom-client's own
 * metrics would show: the counters are prom-client's, and a test holds the histogram's output to
 * prom-client's Histogram.
 */

type Labels<L extends string> = Readonly<Record<L, string>>;

/**
 * Series by label values, one map level per label. Label values repeat (route ids from the policy,
 * Node's own method strings, status texts from V8's number cache), and V8 keeps a string's hash once
 * computed: a lookup here hashes nothing new, where one key string joined per call was a new string
 * to build and hash every time.
 */
class SeriesTable<L extends string, S> {
  readonly #labelNames: readonly L[];
  readonly #create: (labels: Labels<L>) => S;
  #root = new Map<unknown, unknown>();
  #all: S[] = [];

  constructor(labelNames: readonly L[], create: (labels: Labels<L>) => S) {
    this.#labelNames = labelNames;
    this.#create = create;
  }

  get(labels: Labels<L>): S {
    const names = this.#labelNames;
    let level = this.#root;
    // A metric without labels has one series, under the key undefined.
    const last = names.length - 1;
    for (let i = 0; i < last; i++) {
      const value = labels[names[i]!];
      let next = level.get(value) as Map<unknown, unknown> | undefined;
      if (next === undefined) level.set(value, (next = new Map()));
      level = next;
    }
    const value = last < 0 ? undefined : labels[names[last]!];
    let series = level.get(value) as S | undefined;
    if (series === undefined) {
      series = this.#create({ ...labels });
      level.set(value, series);
      this.#all.push(series);
    }
    return series;
  }

  /** Every series, in the order each was first seen. */
  values(): readonly S[] {
    return this.#all;
  }

  clear(): void {
    this.#root = new Map();
    this.#all = [];
  }
}

/** A prom-client counter, counted into a plain number per label set and added to it on each scrape. */
export class BatchedCounter<L extends string> {
  readonly #pending: SeriesTable<L, { readonly labels: Labels<L>; count: number }>;

  /** `zeroes`: series shown at 0 from the start (see createMetrics). */
  constructor({ zeroes = [], ...config }: CounterConfiguration<L> & { labelNames: readonly L[]; zeroes?: readonly Labels<L>[] }) {
    const pending = new SeriesTable(config.labelNames, (labels: Labels<L>) => ({ labels, count: 0 }));
    this.#pending = pending;
    const counter = new Counter<L>({
      ...config,
      collect() {
        for (const series of pending.values()) {
          if (series.count === 0) continue;
          this.inc(series.labels, series.count);
          series.count = 0;
        }
      },
    });
    for (const labels of zeroes) counter.inc(labels, 0);
  }

  inc(labels: Labels<L>): void {
    this.#pending.get(labels).count++;
  }
}

/** What a registry reads from a metric (prom-client's own declarations type `type` as a number). */
export interface MetricExport {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly aggregator: 'sum';
  readonly values: { labels: Record<string, string | number>; value: number; metricName: string }[];
}

interface HistogramSeries<L extends string> {
  readonly labels: Labels<L>;
  /** Observations per bucket, not cumulative; one more than the bounds for those above them all. */
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * A histogram with prom-client's exposition, registered on prom-client registries as a metric of its
 * own: prom-client has no way to add counts to its Histogram other than one `observe` at a time.
 */
export class BatchedHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  /** How the primary combines workers' series (`AggregatorRegistry`), as for prom-client's Histogram. */
  readonly aggregator = 'sum' as const;
  readonly #bounds: readonly number[];
  readonly #series: SeriesTable<L, HistogramSeries<L>>;

  constructor(config: { name: string; help: string; labelNames: readonly L[]; buckets: readonly number[]; registers: readonly Registry[] }) {
    this.name = config.name;
    this.help = config.help;
    const bounds = [...config.buckets].sort((a, b) => a - b);
    this.#bounds = bounds;
    this.#series = new SeriesTable(config.labelNames, (labels) => ({ labels, buckets: new Float64Array(bounds.length + 1), sum: 0, count: 0 }));
    // prom-client types a registry's metrics as its own four classes; it calls only get() and reset().
    for (const registry of config.registers) registry.registerMetric(this as unknown as Metric);
  }

  observe(labels: Labels<L>, value: number): void {
    const series = this.#series.get(labels);
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    series.buckets[i]!++;
    series.sum += value;
    series.count++;
  }

  /** prom-client's shape: cumulative `_bucket` series (`le` first), then `+Inf`, `_sum` and `_count`. */
  async get(): Promise<MetricExport> {
    const values: MetricExport['values'] = [];
    const bucketName = `${this.name}_bucket`;
    for (const series of this.#series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += series.buckets[i]!;
        values.push({ labels: { le: this.#bounds[i]!, ...series.labels }, value: cumulative, metricName: bucketName });
      }
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: bucketName });
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  reset(): void {
    this.#series.clear();
  }
}
