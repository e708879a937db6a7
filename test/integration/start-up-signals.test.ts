import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CLI } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { tempDir } from '../helpers/temp-dir.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Signals that arrive while the gateway starts, before its own handlers are in place: SIGTERM and
 * SIGINT end the process by the same signal as Node's default would, but only after the log lines
 * still buffered are written; SIGHUP (a policy reload) does not kill it, and the reload is done once
 * it runs.
 */
const dist = (file: string) => pathToFileURL(path.resolve('dist', file)).href;

interface Ended {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
}

/** Every child a test started: one still running when the test ends (it failed) is killed. */
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

function collect(child: ChildProcess): { readonly lines: string[]; readonly ended: Promise<Ended> } {
  children.push(child);
  let stdout = '';
  const lines: string[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    lines.splice(0, lines.length, ...stdout.split('\n').filter(Boolean));
  });
  const ended = new Promise<Ended>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout }));
  });
  return { lines, ended };
}

/**
 * `serve` with nothing outside needed: no upstream and no Redis listen (the gateway starts all the
 * same, its key store reported down). stdout is collected; stderr too, as `stderr()`.
 */
function spawnServe(env: Record<string, string>, { ownProcessGroup = false } = {}) {
  const proc = spawn(process.execPath, [CLI, 'serve'], {
    detached: ownProcessGroup,
    env: {
      PATH: process.env.PATH,
      PORT: '0',
      HOST: '127.0.0.1',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'info',
      POLICY_WATCH: 'false',
      UPSTREAM_URL: 'http://127.0.0.1:9',
      REDIS_URL: 'redis://127.0.0.1:9',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return { proc, ...collect(proc), stderr: () => stderr };
}

describe('the logger and the start-up hold, in a process that signals itself', () => {
  /** Logs 20 lines (well under a block: all still buffered), then sends itself `signal`. */
  const child = (signal: string) => `
const { createLogger } = await import(${JSON.stringify(dist('observability/logger/logger.js'))});
const { holdSignalsDuringStartUp } = await import(${JSON.stringify(dist('lifecycle/signals.js'))});
const logger = createLogger('info');
holdSignalsDuringStartUp().flushLogsWith(() => logger.flush());
for (let i = 0; i < 20; i++) logger.info({ i }, 'starting');
process.kill(process.pid, ${JSON.stringify(signal)});
// Only if the signal did not end the process:
setTimeout(() => { logger.info('still running'); process.exit(3); }, 2000);
`;

  it.each(['SIGTERM', 'SIGINT'])('%s: every buffered line is written, then the process ends by that signal', async (signal) => {
    const proc = spawn(process.execPath, ['--input-type=module', '-e', child(signal)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const { code, signal: endedBy, stdout } = await collect(proc).ended;
    expect({ code, endedBy }).toEqual({ code: null, endedBy: signal });
    expect(stdout.split('\n').filter(Boolean).map((l) => [JSON.parse(l).msg, JSON.parse(l).i])).toEqual(Array.from({ length: 20 }, (_, i) => ['starting', i]));
  });
});

describe('a signal that comes while start-up runs without a break', () => {
  /**
   * The signal arrives while JavaScript is busy (parsing and compiling the policy and listening run
   * in one go): it waits for the next turn of the event loop, and must reach the handlers in place
   * then. `handOver` adds the gateway's own handlers before it removes the hold's; removed first,
   * the signal was dropped with the hold's watch.
   */
  const child = (signal: string) => `
const { holdSignalsDuringStartUp } = await import(${JSON.stringify(dist('lifecycle/signals.js'))});
const startUp = holdSignalsDuringStartUp();
process.kill(process.pid, ${JSON.stringify(signal)});
for (const started = Date.now(); Date.now() - started < 100; ); // start-up's work, without a break
const { reloadAsked } = startUp.handOver(() => {
  process.on(${JSON.stringify(signal)}, () => { console.log('the gateway handled ${signal}'); process.exit(0); });
});
console.log('released, reload asked: ' + reloadAsked);
setTimeout(() => { console.log('nobody handled it'); process.exit(7); }, 2000);
`;

  it.each(['SIGTERM', 'SIGHUP'])('%s goes to the gateway\'s handlers', async (signal) => {
    const proc = spawn(process.execPath, ['--input-type=module', '-e', child(signal)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const { code, stdout } = await collect(proc).ended;
    expect({ code, stdout }).toEqual({ code: 0, stdout: `released, reload asked: false\nthe gateway handled ${signal}\n` });
  });
});

/**
 * Loaded before the gateway (in every process, workers too): a process's first listen says so on
 * stderr and then keeps JavaScript busy for a second, as a long policy compile would.
 */
const BUSY_LISTEN = `--import=data:text/javascript,${encodeURIComponent(`import net from 'node:net';
const listen = net.Server.prototype.listen;
let first = true;
net.Server.prototype.listen = function (...args) {
  if (first) { first = false; process.stderr.write('listen: busy\\n'); for (const t = Date.now(); Date.now() - t < 1000; ); }
  return listen.apply(this, args);
};`)}`;

/**
 * Loaded before the gateway, in every process: a process's first listen waits a second (the event
 * loop turns meanwhile, so a signal meets the start-up hold), saying so on stderr; and every read of
 * the policy file says so, with the reader's pid.
 */
const WAITING_LISTEN = `--import=data:text/javascript,${encodeURIComponent(`import net from 'node:net';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
const open = fs.open;
fs.open = function (file, ...rest) {
  if (String(file).endsWith('policy.yaml')) process.stderr.write('policy read by ' + process.pid + '\\n');
  return open.call(this, file, ...rest);
};
syncBuiltinESMExports();
const listen = net.Server.prototype.listen;
let first = true;
net.Server.prototype.listen = function (...args) {
  if (!first) return listen.apply(this, args);
  first = false;
  process.stderr.write('listen: waiting\\n');
  setTimeout(() => listen.apply(this, args), 1000);
  return this;
};`)}`;

describe('serve, held at start-up by a policy file that is a named pipe', () => {
  const policy = readFileSync('policies/acquirer-api.yaml', 'utf8');

  /**
   * `serve` with its policy file a FIFO: reading it blocks until the test writes. The handlers are
   * in place before the read starts, so once the FIFO is open at both ends, the gateway is starting
   * and not yet running.
   */
  async function serveHeld() {
    const fifo = path.join(tempDir('start-up-signals-'), 'policy.yaml');
    execFileSync('mkfifo', [fifo]);
    const served = spawnServe({ POLICY_FILE: fifo });
    /** Resolves once the gateway has opened the FIFO to read it; closing the handle ends that read. */
    const feed = async (text: string) => {
      const handle = await open(fifo, 'w');
      try {
        await handle.writeFile(text);
      } finally {
        await handle.close();
      }
    };
    return { ...served, fifo, feed };
  }

  it('SIGHUP does not end it; once running it reloads the policy, and sees what changed', async () => {
    const g = await serveHeld();
    try {
      // Opened for writing only once the gateway opened it for reading: it is reading the policy now.
      const handle = await open(g.fifo, 'w');
      g.proc.kill('SIGHUP');
      await handle.writeFile(policy);
      await handle.close();
      const listening = await waitFor(() => g.lines.map((l) => JSON.parse(l)).find((e) => e.event === 'listening'), { what: 'serve to listen', timeoutMs: 10_000 });
      // The reload asked for during start-up reads the file again: other bytes this time.
      await g.feed(`${policy}\n# changed while the gateway started\n`);
      const reloaded = await waitFor(() => g.lines.map((l) => JSON.parse(l)).find((e) => e.event === 'policy_reloaded'), { what: 'the reload' });
      expect(reloaded).toMatchObject({ trigger: 'signal', file: g.fifo });
      const metrics = (await request(`http://127.0.0.1:${listening.admin_port}`, '/metrics')).body.toString();
      expect(metrics).toMatch(/^acquirer_gateway_policy_reloads_total\{result="success"\} 1$/m);
      expect(g.proc.exitCode).toBeNull();
    } finally {
      g.proc.kill('SIGTERM');
      await g.ended;
    }
  });

  it('a SIGTERM while the last stretch of start-up runs (listening) reaches the running gateway: it drains and exits 0', async () => {
    // From the policy read to the running gateway's handlers, start-up runs without a turn of the
    // event loop, so the signal waits until the handlers in place then.
    const out = spawnServe({ POLICY_FILE: 'policies/acquirer-api.yaml', NODE_OPTIONS: BUSY_LISTEN });
    await waitFor(() => out.stderr().includes('listen: busy'), { what: 'the first listen', timeoutMs: 10_000 });
    out.proc.kill('SIGTERM');
    const { code, signal } = await out.ended;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(out.lines.map((l) => JSON.parse(l).event)).toEqual(expect.arrayContaining(['listening', 'signal_received', 'stopped']));
  }, 20_000);

  it.each(['SIGTERM', 'SIGINT'] as const)('%s ends it by that signal, without waiting for the policy', async (signal) => {
    const g = await serveHeld();
    const handle = await open(g.fifo, 'w');
    try {
      g.proc.kill(signal);
      const { code, signal: endedBy } = await g.ended;
      expect({ code, endedBy }).toEqual({ code: null, endedBy: signal });
    } finally {
      await handle.close();
    }
  });

  /**
   * WORKERS=2 with `hook` loaded in every process; once the primary's admin listener and both
   * workers' first listens have said `announces` (the workers have been given the policy), the policy file
   * changes and the whole process group gets a SIGHUP, as from a terminal. Resolves once the primary listens.
   */
  async function sighupWhileWorkersStart(hook: string, announces: string) {
    const file = path.join(tempDir('start-up-signals-'), 'policy.yaml');
    writeFileSync(file, policy);
    const out = spawnServe({ WORKERS: '2', POLICY_FILE: file, NODE_OPTIONS: hook }, { ownProcessGroup: true });
    await waitFor(() => out.stderr().split(announces).length - 1 === 3, { what: 'both workers to be listening', timeoutMs: 15_000 });
    const changed = `${policy}\n# changed while the workers started\n`;
    writeFileSync(file, changed);
    process.kill(-out.proc.pid!, 'SIGHUP');
    const listening = await waitFor(() => out.lines.map((l) => JSON.parse(l)).find((e) => e.event === 'listening' && e.workers), { what: 'the primary to listen', timeoutMs: 10_000 });
    return { out, changed, listening };
  }

  /** Once both workers run it: the changed policy alone, reloaded once (by the primary). */
  async function bothRunTheChange(admin: string, changed: string) {
    const hash = createHash('sha256').update(changed).digest('hex');
    const metrics = await waitFor(
      async () => {
        const text = (await request(admin, '/metrics')).body.toString();
        return text.match(/^acquirer_gateway_policy_info\{.*$/gm)?.join('\n') === `acquirer_gateway_policy_info{hash="${hash}"} 1` ? text : undefined;
      },
      { what: 'both workers to run the changed policy' },
    );
    expect(metrics).toMatch(/^acquirer_gateway_policy_reloads_total\{result="success"\} 1$/m);
    expect(metrics).toMatch(/^acquirer_gateway_policy_reloads_total\{result="unchanged"\} 0$/m);
  }

  it('WORKERS=2: a SIGHUP to the process group while the workers start (busy, not yet listening): the primary reads the file again, and each worker runs the change once it serves', async () => {
    const { out, changed, listening } = await sighupWhileWorkersStart(BUSY_LISTEN, 'listen: busy');
    try {
      await bothRunTheChange(`http://127.0.0.1:${listening.admin_port}`, changed);
    } finally {
      out.proc.kill('SIGTERM');
      await out.ended;
    }
  }, 30_000);

  it('WORKERS=2: a SIGHUP to the process group while the workers start, between turns of the event loop: only the primary reads the file, twice', async () => {
    const { out, changed, listening } = await sighupWhileWorkersStart(WAITING_LISTEN, 'listen: waiting');
    try {
      await bothRunTheChange(`http://127.0.0.1:${listening.admin_port}`, changed);
      const readsBy = (pid: number) => out.stderr().split('\n').filter((l) => l === `policy read by ${pid}`).length;
      // At start-up and on the SIGHUP; a worker's own SIGHUP, held while it started, reads nothing.
      expect([listening.pid, ...(listening.workers as number[])].map(readsBy)).toEqual([2, 0, 0]);
    } finally {
      out.proc.kill('SIGTERM');
      await out.ended;
    }
  }, 30_000);
});
