import { gcra } from '../../../src/limits/gcra.js';
import { allowedHeaders, refusedHeaders } from '../../../src/limits/rate-limit-headers.js';
import { LocalRateLimiter } from '../../../src/limits/local-rate-limiter.js';
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
    // The third says the next waits one interval, as the refused fourth does; the budget is whole again after three.
    expect(verdicts[2]).toMatchObject({ retryAfterMs: 100, resetMs: 300 });
    expect(verdicts[3]).toMatchObject({ retryAfterMs: 100, resetMs: 300 });
    expect(gcra(tat, 1099, 100, 300).taken.allowed).toBe(false);
    expect(gcra(tat, 1100, 100, 300).taken).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('leaves the TAT as it was when it refuses, so that refused requests cost nothing', () => {
    const full = gcra(1300, 1000, 100, 300);
    expect(full).toEqual({ tat: 1300, taken: { allowed: false, remaining: 0, resetMs: 300, retryAfterMs: 100 } });
  });

  it('takes a TAT beyond the tolerance (a budget used at a slower rate, before a reload) as exactly used up, not as a debt', () => {
    // 0.05/s with a burst of 4 used up: the TAT is 80 s ahead. Reloaded to 100/s with a burst of 100,
    // the next request waits one interval of the new rate (10 ms), not the old debt.
    const cut = gcra(81_000, 1000, 10, 1000);
    expect(cut).toMatchObject({ tat: 2000, taken: { allowed: false, retryAfterMs: 10 } });
    expect(gcra(cut.tat, 1010, 10, 1000).taken).toMatchObject({ allowed: true, remaining: 0 });
    expect(gcra(81_000, 1000, 20_000, 80_000).taken).toMatchObject({ allowed: false, retryAfterMs: 20_000 });
  });

  it.each([3, 6, 7, 11, 0.3])('allows a whole burst at one instant whatever the rate (%s/s): float arithmetic never refuses the last', (perSecond) => {
    const burst = Math.max(1, Math.round(perSecond));
    let tat = 0;
    let allowed = 0;
    for (let i = 0; i <= burst; i++) {
      const step = gcra(tat, 5000, 1000 / perSecond, (burst * 1000) / perSecond);
      if (step.taken.allowed) allowed++;
      tat = step.tat;
    }
    expect(allowed).toBe(burst);
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

  it("says what is left of this instance's share, which is what a client on one connection meets", () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 2, now: clock.now });
    const limit = compileRateLimit('default', { per_second: 10, burst: 10 });
    expect([1, 2, 3, 4, 5, 6].map(() => limiter.take('key_a', limit).remaining)).toEqual([4, 3, 2, 1, 0, 0]);
  });

  it('gives a budget used up under a slower rate the new, looser rate from the next request (a reload)', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    const slow = compileRateLimit('default', { per_second: 0.05, burst: 4 });
    for (let i = 0; i < 4; i++) limiter.take('key_a', slow);
    expect(limiter.take('key_a', slow)).toMatchObject({ allowed: false, retryAfterMs: 20_000 });
    const fast = compileRateLimit('default', { per_second: 100, burst: 100 });
    expect(limiter.take('key_a', fast)).toMatchObject({ allowed: false, retryAfterMs: 10 });
    clock.advance(10);
    expect(limiter.take('key_a', fast)).toMatchObject({ allowed: true, remaining: 0 });
    clock.advance(500);
    expect(limiter.take('key_a', fast)).toMatchObject({ allowed: true, remaining: 49 });
  });

  it('forgets budgets that are whole again a few at a time, never fewer than it adds: no pass over all of them on one request', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    for (let i = 0; i < 50; i++) limiter.take(`key_${i}`, TEN_PER_SECOND_BURST_3);
    expect(limiter.size).toBeGreaterThanOrEqual(49);
    clock.advance(1000); // every one of them whole again
    const before = limiter.size;
    for (let i = 0; i < 10; i++) limiter.take('key_busy', TEN_PER_SECOND_BURST_3);
    // Two looked at a take, one of which may be the busy key itself, which the take just added.
    expect(limiter.size).toBeLessThanOrEqual(before + 1 - 18);
    for (let i = 0; i < 30; i++) limiter.take('key_busy', TEN_PER_SECOND_BURST_3);
    expect(limiter.size).toBe(1);
  });
});

describe('the RateLimit fields', () => {
  it('state the policy, what may be sent at once, and when the budget is whole', () => {
    const clock = manualClock();
    const limiter = new LocalRateLimiter({ instances: () => 1, now: clock.now });
    expect(allowedHeaders(TEN_PER_SECOND_BURST_3, limiter.take('key_a', TEN_PER_SECOND_BURST_3))).toEqual({ ratelimit: '"default";r=2;t=1', 'ratelimit-policy': '"default";q=10;w=1' });
    limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    const last = limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    const refused = limiter.take('key_a', TEN_PER_SECOND_BURST_3);
    expect(refusedHeaders(TEN_PER_SECOND_BURST_3, refused)).toEqual({ 'retry-after': '1', ratelimit: '"default";r=0;t=1', 'ratelimit-policy': '"default";q=10;w=1' });
    // The last allowed says what the refusal after it says: wait for the next, not for the whole budget.
    expect(allowedHeaders(TEN_PER_SECOND_BURST_3, last).ratelimit).toBe('"default";r=0;t=1');
  });

  it.each([
    [{ per_second: 100, burst: 10 }, '"b";q=100;w=1'],
    [{ per_second: 20, burst: 40 }, '"b";q=40;w=2'],
    [{ per_second: 2.5, burst: 1 }, '"b";q=2;w=1'],
    [{ per_second: 0.2, burst: 1 }, '"b";q=1;w=5'],
    [{ per_second: 0.05, burst: 4 }, '"b";q=4;w=80'],
    [{ per_second: 0.3, burst: 2 }, '"b";q=2;w=7'],
    [{ per_second: 1, burst: 5 }, '"b";q=5;w=5'],
  ])('state %j as a whole quota per whole seconds (the burst\'s time to fill), never less than the burst: %s', (spec, header) => {
    expect(compileRateLimit('b', spec).policyHeader).toBe(header);
    const [, q, w] = /q=(\d+);w=(\d+)/.exec(header)!.map(Number);
    expect(q).toBeGreaterThanOrEqual(spec.burst);
    expect(q! / w!).toBeLessThanOrEqual(Math.max(spec.per_second, spec.burst / w!));
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
