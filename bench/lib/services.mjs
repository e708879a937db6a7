// The processes a benchmark run starts, each its own (in the load generator's process they would
// compete with it for one event loop), and the probes that read them: RSS from /proc, Redis commands
// from INFO commandstats, gateway metrics from its admin port.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(here, '..', '..', 'dist', 'cli.js');
const POLICY_FILE = path.join(here, '..', '..', 'policies', 'acquirer-api.yaml');
const children = [];
const tempDirs = [];

/** Everything started here is killed, and its temporary files removed, when the run ends, however it ends. */
export function stopAll() {
  // SIGTERM: nginx's master takes its workers down with it only when it is let to.
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGTERM');
  // Removed here, not on the child's exit event, which a run ending with process.exit never sees;
  // and only once the child is gone, or nginx's workers write into the folder as it goes.
  for (const { dir, child } of tempDirs.splice(0)) {
    waitUntilExited(child.pid, 3000);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Polls /proc until the process has exited (gone, or a zombie not yet reaped) or the time is up. */
function waitUntilExited(pid, ms) {
  const deadline = Date.now() + ms;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  while (Date.now() < deadline) {
    let state;
    try {
      state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    } catch {
      return;
    }
    if (state === 'Z') return;
    Atomics.wait(pause, 0, 0, 10); // a synchronous pause: this runs in the process's exit handler
  }
}
process.once('exit', stopAll);

export const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

export async function waitFor(check, what, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** GET with a fresh connection; resolves to { status, body }. */
export const get = (url, headers = {}) =>
  new Promise((resolve, reject) =>
    http
      .get(url, { headers, agent: false }, (r) => {
        let body = '';
        r.setEncoding('utf8');
        r.on('data', (d) => (body += d));
        r.on('end', () => resolve({ status: r.statusCode, body }));
      })
      .on('error', reject),
  );

/** `command args…`, or the same run under `wrapper` (`['valgrind', …]`) when one is given. */
const wrapped = (wrapper, command, args) => (wrapper.length === 0 ? [command, args] : [wrapper[0], [...wrapper.slice(1), command, ...args]]);

/**
 * Starts a script of bench/ as its own process; resolves to its port (its first line of output).
 * A first argument `{ nodeArgs, wrapper }` passes options to node itself (`--cpu-prof`), or runs node
 * under another program (`valgrind`).
 */
export function startScript(...scriptAndArgs) {
  const { nodeArgs = [], wrapper = [] } = typeof scriptAndArgs[0] === 'object' ? scriptAndArgs.shift() : {};
  const [script, ...args] = scriptAndArgs;
  const child = spawn(...wrapped(wrapper, process.execPath, [...nodeArgs, path.join(here, '..', script), ...args]), { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve({ child, port: Number(d.toString().trim()), url: `http://127.0.0.1:${Number(d.toString().trim())}` }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

export async function startRedis() {
  if (spawnSync('redis-server', ['--version']).error !== undefined) throw new Error('the benchmark needs redis-server on PATH (Debian: apt-get install redis-server)');
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  children.push(child);
  const cli = (...args) => spawnSync('redis-cli', ['-p', String(port), ...args]).stdout.toString();
  await waitFor(async () => cli('ping').includes('PONG'), 'redis-server');
  return {
    url: `redis://127.0.0.1:${port}`,
    /**
     * Commands Redis has executed so far: `pings` (the gateway's health checks, one per connection
     * per second whatever the traffic) apart from all the others (`other`); this probe's own INFO
     * calls are left out.
     */
    commands() {
      const counts = { pings: 0, other: 0 };
      for (const m of cli('info', 'commandstats').matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
        if (m[1] === 'ping') counts.pings += Number(m[2]);
        else if (m[1] !== 'info') counts.other += Number(m[2]);
      }
      return counts;
    },
  };
}

/** The gateway's CLI, as an operator runs it; resolves to its JSON output. */
export function gatewayCli(env, ...args) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, POLICY_FILE, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`acquirer-gateway ${args.join(' ')} failed: ${err}`))));
  });
}

/** The node flags on dist/cli.js's shebang line: the gateway is measured as it is installed and shipped. */
function shebangFlags(cli = CLI) {
  const first = readFileSync(cli, 'utf8').split('\n', 1)[0];
  const m = /^#!\/usr\/bin\/env -S node((?: --?[\w-]+(?:=\S+)?)*)$/.exec(first);
  if (!m) throw new Error(`${cli}: an unexpected first line: ${first}`);
  return m[1].split(' ').filter(Boolean);
}

/**
 * `acquirer-gateway serve` with the given environment and the node flags of its shebang, access log on
 * (the default level) and thrown away. `BENCH_CPU_PROF=dir` adds `--cpu-prof` (written when the gateway stops);
 * `BENCH_GATEWAY_NODE_ARGS` adds node options of your own. `wrapper` runs node under another program
 * (`valgrind`), with `readyMs` to wait for it.
 */
export async function startGateway(env, { wrapper = [], readyMs = 15_000 } = {}) {
  const port = await freePort();
  const adminPort = await freePort();
  // The flags of the build that runs: another build's shebang may differ from this one's.
  const cli = env.BENCH_CLI ?? process.env.BENCH_CLI ?? CLI;
  const nodeArgs = [...shebangFlags(cli)];
  if (process.env.BENCH_CPU_PROF) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`);
  // Node or V8 options to try on the gateway alone (`--max-semi-space-size=4`, say).
  if (process.env.BENCH_GATEWAY_NODE_ARGS) nodeArgs.push(...process.env.BENCH_GATEWAY_NODE_ARGS.split(' ').filter(Boolean));
  // BENCH_CLI: another build's dist/cli.js (a checkout of an older commit, built), to compare builds in one run;
  // with POLICY_FILE, that build's own policy when the format changed since.
  const child = spawn(...wrapped(wrapper, process.execPath, [...nodeArgs, cli, 'serve']), {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', ADMIN_PORT: String(adminPort), POLICY_FILE: env.POLICY_FILE ?? POLICY_FILE, POLICY_WATCH: 'false' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const admin = `http://127.0.0.1:${adminPort}`;
  await waitFor(async () => (await get(`${admin}/readyz`)).status === 200, 'gateway readiness', readyMs);
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    adminUrl: admin,
    /** Gauges and counters of the admin /metrics, by name (first sample of each). */
    async metrics() {
      const { body } = await get(`${admin}/metrics`);
      const values = {};
      for (const m of body.matchAll(/^([a-zA-Z0-9_:]+)(?:\{[^}]*\})? ([0-9.eE+-]+|NaN)$/gm)) values[m[1]] ??= Number(m[2]);
      return values;
    },
    stop() {
      return new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', resolve);
        child.kill('SIGTERM');
      });
    },
  };
}

/** nginx as a reverse proxy with a static key check, or null when nginx is not installed. */
export async function startNginx(upstreamPort, key) {
  const bin = ['/usr/sbin/nginx', 'nginx'].find((b) => spawnSync(b, ['-v']).error === undefined);
  if (bin === undefined) return null;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-nginx-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  // One worker: the gateway's comparison is one process too. No spooling of large bodies to disk.
  writeFileSync(
    path.join(dir, 'nginx.conf'),
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  map_hash_bucket_size 128; # the key is longer than the default bucket
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream origin { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  map $http_authorization $key_ok { "Bearer ${key}" 1; default 0; }
  server {
    listen 127.0.0.1:${port};
    location / {
      if ($key_ok = 0) { return 401; }
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_max_temp_file_size 0;
      proxy_buffers 8 64k;
    }
  }
}
`,
  );
  const child = spawn(bin, ['-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'inherit'] });
  children.push(child);
  tempDirs.push({ dir, child });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await get(url)).status === 401, 'nginx');
  return { child, url, version: spawnSync(bin, ['-v']).stderr.toString().trim().replace(/^nginx version: /, '') };
}

const statusField = (pid, field) => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
};
/** Resident set size now, bytes. */
export const rss = (pid) => statusField(pid, 'VmRSS');

/**
 * Peak RSS over a stretch of work: the kernel's high-water mark (VmHWM), reset first through
 * clear_refs. Where that is not allowed, sampling every 5 ms stands in (and may miss a short peak).
 */
export async function peakRssDuring(pid, work) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    let peak = rss(pid);
    const timer = setInterval(() => (peak = Math.max(peak, rss(pid))), 5);
    try {
      const result = await work();
      return { result, peak: Math.max(peak, rss(pid)), exact: false };
    } finally {
      clearInterval(timer);
    }
  }
  const result = await work();
  return { result, peak: statusField(pid, 'VmHWM'), exact: true };
}

/** The pids of a process and all its descendants (a clustered gateway's workers). */
function processTree(pid) {
  const childrenOf = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]);
      childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...(childrenOf.get(all[i]) ?? []));
  return all;
}

const CLOCK_TICKS = 100; // USER_HZ on Linux

/**
 * CPU seconds (user + system) of a process's main thread alone: the JavaScript thread, whose time
 * per request bounds a process's requests/s. The rest of cpuSeconds is V8's collector and compiler
 * threads and libuv's pool, which run beside it on a second core.
 */
export function mainThreadCpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** Seconds the gateway's main thread has spent paused in V8's collector so far, every kind summed (its /metrics). */
export async function gcPauseSeconds(adminUrl) {
  const { body } = await get(`${adminUrl}/metrics`);
  let total = 0;
  for (const m of body.matchAll(/^acquirer_gateway_nodejs_gc_duration_seconds_sum\{kind="\w+"\} ([0-9.eE+-]+)$/gm)) total += Number(m[1]);
  return total;
}
/** CPU seconds (user + system) a process and its descendants have used so far. */
export function cpuSeconds(pid) {
  let ticks = 0;
  for (const p of processTree(pid)) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    } catch {
      // gone meanwhile
    }
  }
  return ticks / CLOCK_TICKS;
}
