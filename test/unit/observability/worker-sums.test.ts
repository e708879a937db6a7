import fc from 'fast-check';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { WorkerSums, type WorkerMetrics } from '../../../src/observability/metrics/worker-sums.js';

/** Questions are numbered in the order the primary asks them. */
let questions = 0;
const asked = () => ++questions;

/** What a worker answers a scrape with: its requests counter, a duration histogram and a lag gauge. */
async function answer(requests: number, lag: number): Promise<WorkerMetrics> {
  const registry = new Registry();
  new Counter({ name: 'requests_total', help: 'h', registers: [registry] }).inc(requests);
  const histogram = new Histogram({ name: 'duration_seconds', help: 'h', buckets: [1], registers: [registry] });
  for (let i = 0; i < requests; i++) histogram.observe(0.5);
  new Gauge({ name: 'lag_seconds', help: 'h', registers: [registry] }).set(lag);
  return (await registry.getMetricsAsJSON()) as WorkerMetrics;
}

/** The sums a scrape shows, as Prometheus reads them. */
async function scrape(sums: WorkerSums<object>, fresh: readonly object[]) {
  const text = await (await sums.scrape(new Set(fresh))).metrics();
  const value = (line: RegExp) => {
    const m = line.exec(text);
    return m === null ? undefined : Number(m[1]);
  };
  return {
    requests: value(/^requests_total (\S+)$/m),
    observed: value(/^duration_seconds_count (\S+)$/m),
    lag: value(/^lag_seconds (\S+)$/m),
  };
}

const noRetireError = (err: unknown) => {
  throw err;
};

/** Two workers, a (3 requests, lag 0.25) and b (5, lag 0.5), have answered a first scrape. */
async function twoWorkersAnswered() {
  const sums = new WorkerSums<object>(noRetireError);
  const [a, b] = [{}, {}];
  sums.answered(a, await answer(3, 0.25), asked());
  sums.answered(b, await answer(5, 0.5), asked());
  return { sums, a, b };
}

describe('the workers’ summed metrics', () => {
  it('sums every answer of a scrape, gauges included', async () => {
    const { sums, a, b } = await twoWorkersAnswered();
    expect(await scrape(sums, [a, b])).toEqual({ requests: 8, observed: 8, lag: 0.75 });
  });

  it('counts a worker that did not answer by its last counters and histograms, and leaves out its gauge', async () => {
    const { sums, a, b } = await twoWorkersAnswered();
    await scrape(sums, [a, b]);
    sums.answered(b, await answer(6, 0.5), asked()); // a hangs this time
    expect(await scrape(sums, [b])).toEqual({ requests: 9, observed: 9, lag: 0.5 });
  });

  it('keeps a dead worker’s counters and histograms for good', async () => {
    const { sums, a, b } = await twoWorkersAnswered();
    await scrape(sums, [a, b]);
    sums.retire(a);
    sums.answered(b, await answer(7, 0.5), asked());
    expect(await scrape(sums, [b])).toEqual({ requests: 10, observed: 10, lag: 0.5 });
    const c = {}; // its replacement
    sums.answered(b, await answer(8, 0.5), asked());
    sums.answered(c, await answer(1, 0.125), asked());
    expect(await scrape(sums, [b, c])).toEqual({ requests: 12, observed: 12, lag: 0.625 });
  });

  it('counts a worker once when it answers a scrape and dies before the others have answered', async () => {
    const { sums, a, b } = await twoWorkersAnswered();
    expect((await scrape(sums, [a, b])).requests).toBe(8);
    // The next scrape: a's answer (4) is in, then a exits (retired with its last kept answer, 3),
    // then b answers; the primary reads the answers only now.
    const late = await answer(4, 0.25);
    sums.retire(a);
    expect(sums.answered(a, late, asked())).toBe(false);
    sums.answered(b, await answer(6, 0.5), asked());
    expect(await scrape(sums, [a, b])).toEqual({ requests: 9, observed: 9, lag: 0.5 });
    // And it does not come back as a ghost in later scrapes.
    sums.answered(b, await answer(7, 0.5), asked());
    expect(await scrape(sums, [b])).toEqual({ requests: 10, observed: 10, lag: 0.5 });
  });

  it('keeps the newer answer when two scrapes overlap and the earlier one finishes last', async () => {
    const { sums, a, b } = await twoWorkersAnswered();
    // Scrape X asks both; b hangs, so X waits. Scrape Y asks both later; a answers it at once (b is
    // still hung), and Y is shown. Then X's answer from a, older than Y's, is read at last.
    const forX = asked();
    const forY = asked();
    sums.answered(a, await answer(9, 0.25), forY);
    expect(await scrape(sums, [a])).toEqual({ requests: 14, observed: 14, lag: 0.25 });
    sums.answered(a, await answer(4, 0.25), forX);
    expect(await scrape(sums, [a])).toEqual({ requests: 14, observed: 14, lag: 0.25 });
    // a dies and a replacement c counts 3: a is in the sums by Y's answer (9), not X's (4).
    sums.retire(a);
    const c = {};
    sums.answered(c, await answer(3, 0.125), asked());
    sums.answered(b, await answer(5, 0.5), asked());
    expect(await scrape(sums, [b, c])).toEqual({ requests: 17, observed: 17, lag: 0.625 });
  });

  it('never shows a fractional counter lower when a worker retires and its share is added in another order', async () => {
    const seconds = async (value: number): Promise<WorkerMetrics> => {
      const registry = new Registry();
      new Counter({ name: 'cpu_seconds_total', help: 'h', registers: [registry] }).inc(value);
      return (await registry.getMetricsAsJSON()) as WorkerMetrics;
    };
    const cpu = async (fresh: object[]) => Number(/^cpu_seconds_total (\S+)$/m.exec(await (await sums.scrape(new Set(fresh))).metrics())![1]);
    const sums = new WorkerSums<object>(noRetireError);
    const [a, b, c] = [{}, {}, {}];
    sums.answered(c, await seconds(0.3), asked());
    sums.retire(c);
    sums.answered(a, await seconds(0.1), asked());
    sums.answered(b, await seconds(0.2), asked());
    const before = await cpu([a, b]);
    expect(before).toBe(0.1 + 0.2 + 0.3); // 0.6000000000000001
    sums.retire(b);
    // Summed afresh it is 0.1 + (0.3 + 0.2), which is 0.6: shown as it was, not lower.
    expect(await cpu([a])).toBe(before);
  });

  it('never goes backwards, and never counts more than the workers counted, whatever answers, hangs and deaths come', async () => {
    // Each step: every live worker counts some requests; some answer the scrape; some of those die
    // before the scrape is read; some that did not answer die too (a replacement starts for each).
    const step = fc.record({
      counted: fc.array(fc.nat(5), { minLength: 4, maxLength: 4 }),
      answers: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
      dies: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const sums = new WorkerSums<object>(noRetireError);
        let live = Array.from({ length: 4 }, () => ({ counted: 0 }));
        let everCounted = 0;
        let shown = 0;
        for (const s of steps) {
          live.forEach((w, i) => ((w.counted += s.counted[i]!), (everCounted += s.counted[i]!)));
          const replies = await Promise.all(live.map((w, i) => (s.answers[i] ? answer(w.counted, 0) : null)));
          live.forEach((w, i) => s.dies[i] && sums.retire(w));
          const fresh = live.filter((w, i) => replies[i] !== null && sums.answered(w, replies[i]!, asked()));
          const { requests = 0, observed = 0 } = await scrape(sums, fresh);
          expect(requests).toBe(observed);
          expect(requests).toBeGreaterThanOrEqual(shown);
          expect(requests).toBeLessThanOrEqual(everCounted);
          shown = requests;
          live = live.map((w, i) => (s.dies[i] ? { counted: 0 } : w));
        }
      }),
      { numRuns: 100 },
    );
  });
});
