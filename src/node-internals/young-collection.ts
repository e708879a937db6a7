/**
 * @module
 * Workaround of V8's collector: a young-generation collection on demand.
 *
 * Relies on (undocumented by Node): with `--expose-gc` (on the shebang of dist/cli.js), V8's
 * `gc({ type: 'minor' })` runs a scavenge of the young generation only.
 * Needed for: the read buffers of a streamed download, which V8 frees only when it collects
 * (proxy/streamed-memory.ts; the figure is in docs/performance.md).
 * Canary: test/unit/node-internals/young-collection.test.ts.
 */

export type CollectYoung = () => void;

/** A young-generation collection when node runs with `--expose-gc`, else undefined. */
export function youngCollector(): CollectYoung | undefined {
  const gc = globalThis.gc;
  return gc === undefined ? undefined : () => gc({ type: 'minor' });
}
