import { RestartPacer } from '../../../src/cluster/restart-pacer.js';

describe('RestartPacer', () => {
  it('replaces a worker that served past the quick window at once, every time', () => {
    const pacer = new RestartPacer();
    expect([10_000, 60_000, 3_600_000].map((lived) => pacer.pauseAfter(lived))).toEqual([0, 0, 0]);
  });

  it('doubles the pause after each consecutive quick death, from 1 s up to 30 s', () => {
    const pacer = new RestartPacer();
    expect(Array.from({ length: 8 }, () => pacer.pauseAfter(200))).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  });

  it('starts again from 1 s once a worker has lived past the quick window', () => {
    const pacer = new RestartPacer();
    expect([pacer.pauseAfter(9_999), pacer.pauseAfter(50), pacer.pauseAfter(10_000), pacer.pauseAfter(50)]).toEqual([1_000, 2_000, 0, 1_000]);
  });
});
