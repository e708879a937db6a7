import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Canary for src/node-internals/cluster-worker.ts: when its primary dies, a worker whose
 * `exitedAfterDisconnect` is set runs its own 'disconnect' handler to its end (the gateway drains
 * there); without it, Node's own handler exits the worker first. If Node changes either, this fails.
 */
const script = (outlive: boolean) => `
const cluster = require('node:cluster');
if (cluster.isPrimary) {
  cluster.fork().on('message', () => process.kill(process.pid, 'SIGKILL'));
} else {
  ${outlive ? 'cluster.worker.exitedAfterDisconnect = true;' : ''}
  // Its own handler: still draining a moment after the primary is gone, then says so and exits.
  process.on('disconnect', () => setImmediate(() => { process.stdout.write('drained'); process.exit(0); }));
  process.send('ready');
}`;

/** Runs the script as a file: node:cluster forks workers from the primary's own script. */
function run(outlive: boolean) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-cluster-canary-'));
  try {
    const file = path.join(dir, 'cluster.cjs');
    writeFileSync(file, script(outlive));
    // The worker shares the primary's stdout: spawnSync reads it until the worker has gone too.
    return spawnSync(process.execPath, [file], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('a cluster worker whose primary dies', () => {
  it('drains in its own handler when exitedAfterDisconnect is set', () => {
    const child = run(true);
    expect([child.signal, child.stdout]).toEqual(['SIGKILL', 'drained']);
  });

  it("is ended first by Node's own handler otherwise", () => {
    const child = run(false);
    expect([child.signal, child.stdout]).toEqual(['SIGKILL', '']);
  });
});
