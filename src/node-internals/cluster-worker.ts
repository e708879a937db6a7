/**
 * @module
 * Workaround of node:cluster: a worker that outlives its primary long enough to drain.
 *
 * Relies on (undocumented): Node's own 'disconnect' handler in a worker exits the process at once
 * unless `cluster.worker.exitedAfterDisconnect` is true; the property is documented as read-only
 * information, not as a setting.
 * Canary: test/unit/node-internals/cluster-worker.test.ts.
 */
import cluster from 'node:cluster';

/** In a worker: the primary going away does not end this process; its own 'disconnect' handler decides. */
export function outliveThePrimary(): void {
  cluster.worker!.exitedAfterDisconnect = true;
}
