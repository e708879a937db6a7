import { lineThrottle } from '../../../src/observability/line-throttle.js';

describe('lineThrottle', () => {
  it('lets one line of a kind through per period, and the next says how many it held back and when the last one was', () => {
    let clock = 0;
    const pass = lineThrottle(1000, { now: () => clock });
    const seen = [0, 10, 999, 1000, 1500, 5000].map((at) => ((clock = at), pass('redis down')));
    expect(seen).toEqual([{ count: 0, lastWrittenMsAgo: null }, null, null, { count: 2, lastWrittenMsAgo: 1000 }, null, { count: 1, lastWrittenMsAgo: 4000 }]);
  });

  it('keeps each kind apart', () => {
    let clock = 0;
    const pass = lineThrottle(1000, { now: () => clock });
    expect([pass('a'), pass('b'), pass('a'), pass('b')]).toEqual([{ count: 0, lastWrittenMsAgo: null }, { count: 0, lastWrittenMsAgo: null }, null, null]);
    clock = 1000;
    expect([pass('a'), pass('b')]).toEqual([{ count: 1, lastWrittenMsAgo: 1000 }, { count: 1, lastWrittenMsAgo: 1000 }]);
  });

  it('remembers at most `remembered` kinds: one more starts the memory over, so a kind seen before is let through again', () => {
    const pass = lineThrottle(1000, { remembered: 2, now: () => 0 });
    expect([pass('a'), pass('b'), pass('a')]).toEqual([{ count: 0, lastWrittenMsAgo: null }, { count: 0, lastWrittenMsAgo: null }, null]);
    expect(pass('c')).toEqual({ count: 0, lastWrittenMsAgo: null });
    expect(pass('a')).toEqual({ count: 0, lastWrittenMsAgo: null });
  });
});
