import { ChangeCounter } from '../../../src/keys/change-counter.js';

describe('ChangeCounter', () => {
  it('judges nothing before a baseline, then sees a counter ahead of the notices heard once', () => {
    const counter = new ChangeCounter();
    expect(counter.aheadOfNotices(7)).toBe(false); // no baseline yet
    counter.subscribedAt(7);
    expect(counter.aheadOfNotices(7)).toBe(false);
    counter.heard(8); // a notice arrived
    expect(counter.aheadOfNotices(8)).toBe(false);
    expect(counter.aheadOfNotices(9)).toBe(true); // the notice of change 9 never came
    expect(counter.aheadOfNotices(9)).toBe(false); // one lost notice drops the cache once
  });

  it('takes notices out of order and without a counter (published by an older command)', () => {
    const counter = new ChangeCounter();
    counter.subscribedAt(3);
    counter.heard(5);
    counter.heard(4);
    counter.heard(undefined);
    expect(counter.aheadOfNotices(5)).toBe(false);
    expect(counter.aheadOfNotices(6)).toBe(true);
  });

  it('forgets what it heard when the subscription is lost, until the next baseline', () => {
    const counter = new ChangeCounter();
    counter.subscribedAt(2);
    counter.reset();
    expect(counter.aheadOfNotices(10)).toBe(false);
    counter.subscribedAt(10);
    expect(counter.aheadOfNotices(11)).toBe(true);
  });
});
