import { gcra } from '../../../src/limits/gcra.js';
import { allowedHeaders, refusedHeaders } from '../../../src/limits/rate-limit-headers.js';
import { LocalRateLimiter, SWEEP_EVERY_MS } from '../../../src/limits/local-rate-limiter.js';
import { compileRateLimit } from '../../../src/policy/rate-limit.js';

/** A clock the test moves by hand (ms). */
function manualClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}

const TEN_PER_SECOND_BURST_3 = compileRateLimit('default', { per_second: 10, burst: 3 });

describe('gcra', () => {
  it('allows a whole burst at once, then one request per interval', () => {
    let tat = 0;
    const verdicts = [];
    for (let i = 0; i < 4; i++) {
      const step = gcra(tat, 1000, 100, 300);
      tat = step.tat;
      verdicts.push(step.taken);
    }
    expect(verdicts.map((v) => [v.allowed, v.remaining])).toEqual([[true, 2], [true, 1], [true, 0], [false, 0]]);
    // The fourth waits one interval; the budget is whole again after three.
    expect(verdicts[3]).toMatchObject({ retryAfterMs: 100, resetMs: 300 });
    expect(gcra(tat, 1099, 100, 300).taken.allowed).toBe(false);
    expect(gcra(tat, 1100, 100, 300).taken).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('leaves the TAT unchanged when it refuses, so that refused requests cost nothing', () => {
    const full = gcra(1300, 1000, 100, 300);
    expect(full).toEqual({ tat: 1300, taken: { allowed: false, remaining: 0, resetMs: 300, retryAfterMs: 100 } });
  });
});

describe('LocalRateLimiter', () => {
  it("holds each key to its own budget, and each budget apart: a route's own and the default", () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    const download = compileRateLimit('eod_statement_download', { per_second: 1, burst: 1 });
    const take = (key: string, limit = TEN_PER_SECOND_BURST_3) => limiter.take(key, limit).allowed;
    expect([take('key_a'), take('key_a'), take('key_a'), take('key_a')]).toEqual([true, true, true, false]);
    expect(take('key_b')).toBe(true);
    expect([take('key_a', download), take('key_a', download)]).toEqual([true, false]);
    clock.advance(100);
    expect([take('key_a'), take('key_a')]).toEqual([true, false]);
  });

  it('lets through the declared rate over time, however the requests come', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    let allowed = 0;
    // 10 s of a request every 7 ms (about 143/s) against 10/s with a burst of 3.
    for (let t = 0; t < 10_000; t += 7) {
      if (limiter.take('key_a', TEN_PER_SECOND_BURST_3).allowed) allowed++;
      clock.advance(7);
    }
    expect(allowed).toBeGreaterThanOrEqual(100);
    expect(allowed).toBeLessThanOrEqual(103);
  });

  it('divides the rate and the burst among the instances counted, never the burst below one request', () => {
    const clock = manualClock();
    let instances = 3;
    const limiter = new LocalRateLimiter({ instances: () => instances, now: clock.now });
    const burst9 = compileRateLimit('default', { per_second: 30, burst: 9 });
    const burst = () => {
      let n = 0;
      while (limiter.take('key_a', burst9).allowed) n++;
      return n;
    };
    expect(burst()).toBe(3);
    clock.advance(100); // 3 of the fleet's 30/s, a third of them here
    expect(burst()).toBe(1);
    instances = 20;
    clock.advance(1000);
    expect(burst()).toBe(1);
  });

  it("says what is left in the fleet's terms: this instance's share times the instances", () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 2, now: clock.now });
    const limit = compileRateLimit('default', { per_second: 10, burst: 10 });
    expect(limiter.take('key_a', limit).remaining).toBe(8);
    expect(limiter.take('key_a', limit).remaining).toBe(6);
  });

  it('forgets budgets that are whole again, at most once per sweep interval', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    for (let i = 0; i < 50; i++) limiter.take(`key_${i}`, TEN_PER_SECOND_BURST_3);
    expect(limiter.size).toBe(50);
    clock.advance(SWEEP_EVERY_MS);
    limiter.take('key_last', TEN_PER_SECOND_BURST_3);
    expect(limiter.size).toBe(1);
  });
});

describe('the RateLimit fields', () => {
  it('state the policy, what may be sent at once, and when the budget is whole', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    expect(allowedHeaders(TEN_PER_SECOND_BURST_3, limiter.take('key_a', TEN_PER_SECOND_BURST_3))).toEqual({ ratelimit: '"default";r=2;t=1', 'ratelimit-policy': '"default";q=10;w=1' });
    limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    const refused = limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    expect(refusedHeaders(TEN_PER_SECOND_BURST_3, refused)).toEqual({ 'retry-after': '1', ratelimit: '"default";r=0;t=1', 'ratelimit-policy': '"default";q=10;w=1' });
  });

  it.each([
    [{ per_second: 100, burst: 10 }, '"b";q=100;w=1'],
    [{ per_second: 2.5, burst: 1 }, '"b";q=2;w=1'],
    [{ per_second: 0.2, burst: 1 }, '"b";q=1;w=5'],
    [{ per_second: 0.3, burst: 2 }, '"b";q=1;w=4'],
  ])('state %j as a whole quota per whole seconds, never more than the rate: %s', (spec, header) => {
    expect(compileRateLimit('b', spec).policyHeader).toBe(header);
  });

  it('give a slow budget\'s wait in whole seconds, rounded up', () => {
    const slow = compileRateLimit('eod_statement_download', { per_second: 0.2, burst: 1 });
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    limiter.take('key_a', slow);
    clock.advance(1500);
    expect(refusedHeaders(slow, limiter.take('key_a', slow))).toMatchObject({ 'retry-after': '4', ratelimit: '"eod_statement_download";r=0;t=4' });
  });
});
