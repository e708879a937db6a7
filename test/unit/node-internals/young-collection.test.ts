import { spawnSync } from 'node:child_process';
import { youngCollector } from '../../../src/node-internals/young-collection.js';

/**
 * Canary for src/node-internals/young-collection.ts: with --expose-gc, `gc({ type: 'minor' })` runs a
 * young-generation collection only. If V8 changes the option, this fails.
 */
describe('gc({ type: "minor" })', () => {
  it('runs a young-generation collection, and no full one', () => {
    const script = `
      const { PerformanceObserver, constants } = require('node:perf_hooks');
      const kinds = [];
      const observer = new PerformanceObserver((list) => { for (const e of list.getEntries()) kinds.push(e.detail.kind); });
      observer.observe({ entryTypes: ['gc'] });
      setTimeout(() => {
        kinds.length = 0;
        gc({ type: 'minor' });
        setTimeout(() => {
          observer.disconnect();
          process.stdout.write(JSON.stringify({ kinds, minor: constants.NODE_PERFORMANCE_GC_MINOR }));
        }, 100);
      }, 100);`;
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
    expect(child.stderr).toBe('');
    const { kinds, minor } = JSON.parse(child.stdout) as { kinds: number[]; minor: number };
    expect(kinds).toEqual([minor]);
  });

  it('is not there without --expose-gc: the gateway then leaves collections to V8 (and says so at start)', () => {
    expect(typeof globalThis.gc).toBe('undefined');
    expect(youngCollector()).toBeUndefined();
  });
});
