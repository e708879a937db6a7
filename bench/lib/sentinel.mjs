// A Redis primary, one replica and three Sentinels (quorum 2) monitoring them as `mymaster`, on free
// loopback ports, with their files in a temporary folder: the topology of
// test/helpers/redis-sentinel-topology.ts (which the build does not emit), in plain JavaScript and
// with redis-cli for the few admin commands, for the fleet scenario. Every process is killed, and the
// folder removed, by stop() or when the run ends, however it ends.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './services.mjs';

const HOST = '127.0.0.1';
const NAME = 'mymaster';

const onPath = (binary) => spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;

/** One command through redis-cli; its output ('' when the server does not answer). */
const redisCli = (port, ...args) => spawnSync('redis-cli', ['-h', HOST, '-p', String(port), ...args], { encoding: 'utf8', timeout: 2000 }).stdout ?? '';

async function until(check, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export async function startSentinelTopology() {
  if (!onPath('redis-server') || !onPath('redis-cli')) throw new Error('the fleet scenario needs redis-server and redis-cli on PATH (Debian: apt-get install redis-server)');
  const sentinelCommand = onPath('redis-sentinel') ? 'redis-sentinel' : 'redis-server';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-sentinel-'));
  const children = [];
  const killAll = () => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', killAll);

  /** Starts `command` on a free port and waits until it answers PING. */
  const start = async (command, argsFor) => {
    const port = await freePort();
    const child = spawn(command, argsFor(port), { stdio: 'ignore' });
    children.push(child);
    await until(() => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${command} on port ${port} exited with ${child.exitCode ?? child.signalCode}`);
      return redisCli(port, 'ping').includes('PONG');
    }, `${command} on port ${port}`, 5000);
    return { port, pid: child.pid };
  };

  try {
    const dataArgs = ['--bind', HOST, '--dir', dir, '--save', '', '--appendonly', 'no', '--repl-diskless-sync-delay', '0', '--repl-ping-replica-period', '1', '--loglevel', 'warning'];
    const primary = await start('redis-server', (port) => ['--port', String(port), ...dataArgs]);
    const replica = await start('redis-server', (port) => ['--port', String(port), ...dataArgs, '--replicaof', HOST, String(primary.port)]);
    await until(() => /slave0:.*state=online/.test(redisCli(primary.port, 'info', 'replication')), 'the replica to be in sync with the primary');
    const sentinels = [];
    for (let i = 0; i < 3; i++) {
      const sentinel = await start(sentinelCommand, (port) => {
        const file = path.join(dir, `sentinel-${port}.conf`);
        writeFileSync(
          file,
          [
            `port ${port}`,
            `bind ${HOST}`,
            `dir ${dir}`,
            `sentinel monitor ${NAME} ${HOST} ${primary.port} 2`,
            `sentinel down-after-milliseconds ${NAME} 1000`,
            `sentinel failover-timeout ${NAME} 3000`,
            `sentinel parallel-syncs ${NAME} 1`,
            '',
          ].join('\n'),
        );
        return sentinelCommand === 'redis-sentinel' ? [file] : [file, '--sentinel'];
      });
      sentinels.push(sentinel);
    }
    // Settled once every sentinel knows the replica and the two other sentinels (hellos every 2 s).
    await until(
      () =>
        sentinels.every(({ port }) => {
          const lines = redisCli(port, 'sentinel', 'master', NAME).trim().split('\n');
          const fields = new Map();
          for (let i = 0; i + 1 < lines.length; i += 2) fields.set(lines[i], lines[i + 1]);
          return fields.get('num-slaves') === '1' && fields.get('num-other-sentinels') === '2' && fields.get('flags') === 'master';
        }),
      'every sentinel to know the replica and the other sentinels',
    );
    return {
      name: NAME,
      /** `host:port,…`, as REDIS_SENTINELS takes them. */
      sentinels: sentinels.map(({ port }) => `${HOST}:${port}`).join(','),
      primary,
      replica,
      /** Every process of the topology, for their CPU. */
      pids: [primary, replica, ...sentinels].map((p) => p.pid),
      /** Kills every process and waits until each has exited (and been reaped), then removes the folder. */
      async stop() {
        const exited = children.map((child) => (child.exitCode !== null || child.signalCode !== null ? null : new Promise((r) => child.once('exit', r))));
        killAll();
        process.removeListener('exit', killAll);
        await Promise.all(exited);
      },
    };
  } catch (err) {
    killAll();
    process.removeListener('exit', killAll);
    throw err;
  }
}
