import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { BatchedCounter, BatchedHistogram } from '../../../src/observability/metrics/batched-metrics.js';

/**
 * The batched metrics must be indistinguishable from prom-client's own at /metrics: each test feeds
 * the same events to both and compares the exposition text.
 */
const BUCKETS = [0.001, 0.01, 0.1, 1];
// On a bound, between bounds, below and above them all, and repeated label sets.
const OBSERVATIONS: [string, number][] = [
  ['list', 0.0004], ['list', 0.001], ['list', 0.05], ['read', 0.1], ['read', 3], ['list', 0.0101], ['read', 1e-9], ['list', 120],
];

function pair() {
  const ours = new Registry();
  const theirs = new Registry();
  const histogram = new BatchedHistogram({ name: 'h_seconds', help: 'help', labelNames: ['route'], buckets: BUCKETS, registers: [ours] });
  const reference = new Histogram({ name: 'h_seconds', help: 'help', labelNames: ['route'], buckets: BUCKETS, registers: [theirs] });
  const counter = new BatchedCounter({ name: 'c_total', help: 'help', labelNames: ['route', 'status'], registers: [ours] });
  const referenceCounter = new Counter({ name: 'c_total', help: 'help', labelNames: ['route', 'status'], registers: [theirs] });
  return {
    ours,
    theirs,
    observe(route: string, seconds: number, status = '200') {
      histogram.observe({ route }, seconds);
      reference.observe({ route }, seconds);
      counter.inc({ route, status });
      referenceCounter.inc({ route, status });
    },
    histogram,
  };
}

describe('batched metrics', () => {
  it('expose the same text as prom-client for the same observations', async () => {
    const p = pair();
    for (const [route, seconds] of OBSERVATIONS) p.observe(route, seconds, seconds > 1 ? '504' : '200');
    const text = await p.ours.metrics();
    expect(text).toBe(await p.theirs.metrics());
    expect(text).toContain('h_seconds_bucket{le="0.001",route="list"} 2');
    expect(text).toContain('h_seconds_bucket{le="+Inf",route="list"} 5');
    expect(text).toContain('c_total{route="read",status="504"} 1');
  });

  it('count each event once, however often they are scraped', async () => {
    const p = pair();
    p.observe('list', 0.002);
    await p.ours.metrics();
    await p.ours.metrics();
    p.observe('list', 0.002);
    p.observe('list', 0.5, '404');
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
    expect(await p.ours.metrics()).toContain('c_total{route="list",status="200"} 2');
  });

  it('sum across workers as prom-client does (the primary with WORKERS)', async () => {
    const workers = [pair(), pair()];
    workers[0]!.observe('list', 0.002);
    workers[1]!.observe('list', 0.2);
    workers[1]!.observe('read', 0.02, '403');
    const ours = AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.ours.getMetricsAsJSON())));
    const theirs = AggregatorRegistry.aggregate(await Promise.all(workers.map((w) => w.theirs.getMetricsAsJSON())));
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('h_seconds_count{route="list"} 2');
  });

  it('a reset histogram starts from nothing', async () => {
    const p = pair();
    p.observe('list', 0.002);
    p.histogram.reset();
    expect(await p.ours.metrics()).not.toContain('h_seconds_bucket');
  });

  it('keep label sets apart whatever characters their values hold', async () => {
    const p = pair();
    // Joined with a separator into one key, these two would be the same series.
    p.observe('a\u0000b', 0.002, 'c');
    p.observe('a', 0.002, 'b\u0000c');
    p.observe('a', 0.2, 'b\u0000c');
    expect(await p.ours.metrics()).toBe(await p.theirs.metrics());
    expect(await p.ours.metrics()).toContain('h_seconds_count{route="a"} 2');
  });

  it('a reset histogram counts again from its next observation', async () => {
    const p = pair();
    p.observe('list', 0.002);
    p.histogram.reset();
    p.observe('list', 0.2);
    expect(await p.ours.metrics()).toContain('h_seconds_count{route="list"} 1');
  });
});
