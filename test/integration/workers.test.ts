import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { headerValues, startUpstream, type RecordingUpstream, type UpstreamHandler } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';

/**
 * WORKERS=2: one primary and two worker processes behind one port. Requests are served by both,
 * the admin endpoints speak for all of them, a worker that dies is replaced, and SIGTERM drains
 * every worker before the primary exits.
 */
const LIST = '/v1/acquirer/eod_statements';
const PERMISSIONS = '/v1/acquirer/api_keys/permissions';
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const SHIPPED_POLICY = readFileSync('policies/acquirer-api.yaml', 'utf8');

/** A temporary directory for one test, removed after it. */
const dirs: string[] = [];
const tempDir = () => {
  dirs.push(mkdtempSync(path.join(os.tmpdir(), 'gw-workers-')));
  return dirs.at(-1)!;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

let redis: TestRedis;
let upstream: RecordingUpstream;
let env: Record<string, string>;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  upstream.handle(answerList);
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url };
}, 30_000);

afterAll(() =>
  stopAll(
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

/** SIGKILL to a process that may have exited meanwhile (its check and the kill race): gone is fine. */
const killIfAlive = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
};
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const logEntries = (g: ServeProcess) => g.logLines.map((l) => JSON.parse(l) as Record<string, unknown>);
const workerPids = (g: ServeProcess) => logEntries(g).find((e) => e.event === 'listening')!.workers as number[];
/** The primary's pid, which every line it writes carries (as each worker's carry theirs). */
const primaryPid = (g: ServeProcess) => logEntries(g).find((e) => e.event === 'listening')!.pid as number;
/** A process's resident memory as the kernel counts it, bytes. */
const vmRss = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
const metric = (text: string, series: string) => Number(text.split('\n').find((l) => l.startsWith(series + ' '))?.split(' ')[1]);

const answerList: UpstreamHandler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end('{"eod_statements":[]}');
};

/**
 * Sends one list request whose upstream answer stops half-way until `release()`; resolves once the
 * upstream holds it, to the whole response to come.
 */
async function holdRequestInFlight(g: ServeProcess, key: string) {
  let finish: (() => void) | undefined;
  upstream.handle((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"eod_statements":');
    finish = () => res.end('[]}');
  });
  const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get(`${g.url}${LIST}`, { headers: bearer(key), agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
      res.on('error', () => {}); // a cut is seen at 'close'
      res.on('close', () => (res.complete ? undefined : reject(new Error('the response was cut'))));
    }).on('error', reject);
  });
  await waitFor(() => finish !== undefined, { what: 'the request to reach the upstream' });
  return { inFlight, release: () => finish!() };
}

/** Sends `n` requests, each on its own connection, so the primary hands them to both workers. */
async function burst(g: ServeProcess, key: string, n: number): Promise<number[]> {
  return Promise.all(Array.from({ length: n }, async () => (await request(g.url, LIST, bearer(key))).status));
}

describe('WORKERS=2', () => {
  it('serves from two worker processes and reports for both on the admin port', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const pids = workerPids(g);
      expect(new Set(pids).size).toBe(2);
      expect(pids.every(alive)).toBe(true);
      expect(pids).not.toContain(g.child.pid);
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'readiness' });
      expect(JSON.parse((await request(g.adminUrl, '/readyz')).body.toString())).toEqual({
        status: 'ready',
        checks: { policy: 'ok', key_store: 'ok', shutdown: 'no', workers: 'ok' },
      });

      const before = upstream.received.length;
      expect(await burst(g, key, 40)).toEqual(Array(40).fill(200));
      const forwarded = upstream.received.slice(before);
      expect(forwarded).toHaveLength(40);
      for (const r of forwarded) expect(headerValues(r.rawHeaders, 'x-acquirer-id')).toEqual(['acq_workers']);

      // Both workers answered (each access line carries its worker's pid), and the primary's
      // /metrics sums what each worker counted.
      await waitFor(() => logEntries(g).filter((e) => e.event === 'request').length === 40, { what: 'the access lines' });
      const servedBy = new Set(logEntries(g).filter((e) => e.event === 'request').map((e) => e.pid));
      expect(servedBy).toEqual(new Set(pids));
      const text = (await request(g.adminUrl, '/metrics')).body.toString();
      expect(metric(text, 'acquirer_gateway_requests_total{route="eod_statements_list",method="GET",status="200"}')).toBe(40);
      expect(metric(text, 'acquirer_gateway_key_store_up')).toBe(1);
      expect(text).toMatch(/^acquirer_gateway_policy_info\{hash="[0-9a-f]{64}"\} 1$/m);
      // The primary's own process, beside the workers' sums: its resident memory as the kernel has it.
      const primaryRss = vmRss(g.child.pid!);
      const reported = metric(text, 'acquirer_gateway_primary_process_resident_memory_bytes');
      expect(reported).toBeGreaterThan(primaryRss * 0.8);
      expect(reported).toBeLessThan(primaryRss * 1.25);
      expect(metric(text, 'acquirer_gateway_process_resident_memory_bytes')).toBeGreaterThan(reported); // two workers, each larger
      expect(metric(text, 'acquirer_gateway_primary_process_cpu_seconds_total')).toBeGreaterThan(0);
      expect(text).not.toContain('acquirer_gateway_primary_nodejs_');
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  it('replaces a worker that dies, and keeps serving meanwhile', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const [victim, survivor] = workerPids(g) as [number, number];
      process.kill(victim, 'SIGKILL');
      const replaced = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_replaced'), { timeoutMs: 10_000, what: 'the replacement' });
      expect(replaced).toMatchObject({ worker_pid: victim, signal: 'SIGKILL', pid: primaryPid(g) });
      // One pid per line, the writer's: JSON.parse would keep only the last of two.
      expect(g.logLines.filter((l) => (l.match(/"pid":/g) ?? []).length !== 1)).toEqual([]);
      const replacement = replaced.replacement_pid as number;
      expect(alive(replacement)).toBe(true);
      expect(alive(survivor)).toBe(true);
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 10_000, what: 'readiness with the replacement' });
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 40_000);

  it('with PORT=0, replaces every worker on the port the gateway announced, not on another free one', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2', PORT: '0' });
    try {
      const pids = workerPids(g);
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      // Both gone at once: the port's handle closed with them, and the replacements listen afresh.
      const replacements = await waitFor(
        () => {
          const listening = logEntries(g).filter((e) => e.event === 'worker_listening' && !pids.includes(e.pid as number));
          return listening.length === 2 ? listening : undefined;
        },
        { timeoutMs: 15_000, what: 'both replacements to listen' },
      );
      expect(replacements.map((e) => e.port)).toEqual([g.port, g.port]);
      expect((await request(g.url, LIST, bearer(key))).status).toBe(200);
    } finally {
      await g.stop();
    }
  }, 30_000);

  it('pauses before replacing workers that keep dying soon after they start: 1 s, then 2 s', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const time = (e: Record<string, unknown>) => e.time as number;
      const killAndWaitForReplacement = async (victim: number) => {
        process.kill(victim, 'SIGKILL');
        const paused = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_died_soon' && e.worker_pid === victim), {
          timeoutMs: 10_000,
          what: `the pause after ${victim} died`,
        });
        const replaced = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_replaced' && e.worker_pid === victim), { timeoutMs: 10_000, what: `${victim}'s replacement` });
        // The replacement is forked only after the pause (both times are the primary's own clock).
        expect(time(replaced) - time(paused)).toBeGreaterThanOrEqual((paused.pause_ms as number) - 5);
        return { paused, replacement: replaced.replacement_pid as number };
      };
      const [first] = workerPids(g) as [number, number];
      const one = await killAndWaitForReplacement(first);
      expect(one.paused).toMatchObject({ worker_pid: first, signal: 'SIGKILL', pause_ms: 1_000 });
      await waitFor(() => logEntries(g).some((e) => e.event === 'worker_listening' && e.pid === one.replacement), { timeoutMs: 10_000, what: 'the replacement to listen' });
      const two = await killAndWaitForReplacement(one.replacement);
      expect(two.paused).toMatchObject({ worker_pid: one.replacement, pause_ms: 2_000 });
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 10_000, what: 'readiness after the pauses' });
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 40_000);

  it('reads the policy file in the primary alone: a worker replaced after a refused edit starts, and runs what its sibling runs', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const policyFile = path.join(tempDir(), 'policy.yaml');
    writeFileSync(policyFile, SHIPPED_POLICY);
    const g = await startServe({ ...env, WORKERS: '2', POLICY_FILE: policyFile });
    try {
      const [victim] = workerPids(g) as [number, number];
      writeFileSync(policyFile, SHIPPED_POLICY.replace('version: 1', 'version: 2'));
      const refusals = () => logEntries(g).filter((e) => e.event === 'policy_reload_refused');
      await waitFor(() => refusals().length > 0, { timeoutMs: 10_000, what: 'the refusal' });
      process.kill(victim, 'SIGKILL');
      // Replaced after the 1 s pause of a quick death, and given the policy the primary accepted.
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 10_000, what: 'readiness with the replacement' });
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
      expect(logEntries(g).filter((e) => e.event === 'replacement_failed' || e.event === 'no_worker_serving')).toEqual([]);
      // Read and refused once, by the primary: not once per worker.
      expect(refusals().map((e) => e.pid)).toEqual([primaryPid(g)]);
      const metrics = (await request(g.adminUrl, '/metrics')).body.toString();
      expect(metric(metrics, 'acquirer_gateway_policy_reloads_total{result="failure"}')).toBe(1);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  it('runs one policy in every worker: a replacement after an edit not yet reloaded runs the accepted one, and a SIGHUP moves all', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const policyFile = path.join(tempDir(), 'policy.yaml');
    const withoutCatalogue = SHIPPED_POLICY.replace(/\n  - id: api_keys_permissions[\s\S]*$/, '\n');
    expect(withoutCatalogue).not.toBe(SHIPPED_POLICY);
    writeFileSync(policyFile, SHIPPED_POLICY);
    const g = await startServe({ ...env, WORKERS: '2', POLICY_FILE: policyFile, POLICY_WATCH: 'false' });
    const catalogue = async () => (await Promise.all(Array.from({ length: 10 }, () => request(g.url, PERMISSIONS, bearer(key))))).map((r) => r.status);
    try {
      const [victim] = workerPids(g) as [number, number];
      writeFileSync(policyFile, withoutCatalogue);
      process.kill(victim, 'SIGKILL');
      await waitFor(() => logEntries(g).some((e) => e.event === 'worker_listening' && !workerPids(g).includes(e.pid as number)), { timeoutMs: 10_000, what: 'the replacement' });
      // Ten connections, handed to both workers in turn: the replacement answers as its sibling does.
      expect(await catalogue()).toEqual(Array(10).fill(200));
      process.kill(primaryPid(g), 'SIGHUP');
      await waitFor(async () => (await catalogue()).every((status) => status === 404), { what: 'every worker to run the reloaded policy' });
      const metrics = (await request(g.adminUrl, '/metrics')).body.toString();
      expect(metric(metrics, 'acquirer_gateway_policy_reloads_total{result="success"}')).toBe(1);
      expect(metrics.match(/^acquirer_gateway_policy_info\{hash="[0-9a-f]{64}"\} 1$/gm)).toEqual([`acquirer_gateway_policy_info{hash="${sha256(withoutCatalogue)}"} 1`]);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  /** The lines of `policy_info` in a /metrics text: one per hash some process runs. */
  const policyInfo = (text: string) => text.split('\n').filter((l) => l.startsWith('acquirer_gateway_policy_info{'));

  /**
   * Loaded in every process: in the one that reads the policy file (the single process, or the
   * primary), the file is edited once its first read is over (its descriptor closed): before the
   * file is watched.
   */
  const EDIT_AFTER_FIRST_READ = `--import=data:text/javascript,${encodeURIComponent(`import cluster from 'node:cluster';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
if (cluster.isPrimary) {
  const { open, close } = fs;
  const reading = new Set();
  let first = true;
  fs.open = function (file, ...rest) {
    const done = rest.pop();
    return open.call(this, file, ...rest, (err, fd) => {
      if (!err && String(file) === process.env.POLICY_FILE) reading.add(fd);
      done(err, fd);
    });
  };
  fs.close = function (fd, ...rest) {
    if (reading.delete(fd) && first) {
      first = false;
      const file = process.env.POLICY_FILE;
      fs.writeFileSync(file, fs.readFileSync(file, 'utf8') + '\\n# edited just after the start-up read\\n');
    }
    return close.call(this, fd, ...rest);
  };
  syncBuiltinESMExports();
}`)}`;

  it.each(['1', '2'])('WORKERS=%s: an edit between the start-up read and the watch is not lost', async (workers) => {
    const policyFile = path.join(tempDir(), 'policy.yaml');
    writeFileSync(policyFile, SHIPPED_POLICY);
    const g = await startServe({ ...env, WORKERS: workers, POLICY_FILE: policyFile, NODE_OPTIONS: EDIT_AFTER_FIRST_READ });
    try {
      const edited = readFileSync(policyFile, 'utf8');
      expect(edited).not.toBe(SHIPPED_POLICY);
      const metrics = await waitFor(
        async () => {
          const text = (await request(g.adminUrl, '/metrics')).body.toString();
          return policyInfo(text).join() === `acquirer_gateway_policy_info{hash="${sha256(edited)}"} 1` ? text : undefined;
        },
        { what: 'the edited policy to run' },
      );
      expect(metric(metrics, 'acquirer_gateway_policy_reloads_total{result="success"}')).toBe(1);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  /** Loaded in every process: the first worker forked corrupts each policy the primary sends it after the first. */
  const FIRST_WORKER_CORRUPTS_UPDATES = `--import=data:text/javascript,${encodeURIComponent(`import cluster from 'node:cluster';
if (cluster.isWorker && cluster.worker.id === 1) {
  const emit = process.emit;
  let seen = 0;
  process.emit = function (event, message, ...rest) {
    if (event === 'message' && message && message.type === 'policy' && ++seen > 1) message = { ...message, source: 'routes: [' };
    return emit.call(this, event, message, ...rest);
  };
}`)}`;

  it('is not ready while a worker runs a policy other than the one accepted last', async () => {
    const policyFile = path.join(tempDir(), 'policy.yaml');
    writeFileSync(policyFile, SHIPPED_POLICY);
    const g = await startServe({ ...env, WORKERS: '2', POLICY_FILE: policyFile, NODE_OPTIONS: FIRST_WORKER_CORRUPTS_UPDATES });
    try {
      // Ready first: each worker's key store may still be connecting when the primary says it listens.
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'both workers ready' });
      const changed = `${SHIPPED_POLICY}\n# changed\n`;
      writeFileSync(policyFile, changed);
      const failed = await waitFor(() => logEntries(g).find((e) => e.event === 'policy_not_applied'), { what: "the worker's refusal" });
      expect(failed).toMatchObject({ level: 50, running: sha256(SHIPPED_POLICY) });
      const ready = await waitFor(
        async () => {
          const answer = await request(g.adminUrl, '/readyz');
          return answer.status === 503 ? JSON.parse(answer.body.toString()) : undefined;
        },
        { what: 'readiness to drop' },
      );
      expect(ready.checks).toMatchObject({ policy: 'not_loaded', workers: 'ok' });
      // The other worker applied it.
      await waitFor(() => logEntries(g).some((e) => e.event === 'policy_applied' && e.to === sha256(changed)), { what: 'the other worker to apply it' });
      expect(policyInfo((await request(g.adminUrl, '/metrics')).body.toString()).sort()).toEqual(
        [`acquirer_gateway_policy_info{hash="${sha256(SHIPPED_POLICY)}"} 1`, `acquirer_gateway_policy_info{hash="${sha256(changed)}"} 1`].sort(),
      );
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  /**
   * Loaded in every process: while the file named by READINESS_GATE exists, the first worker forked
   * answers a readiness question at once but sends the answer only after it has applied the next
   * policy the primary sends: an answer on its way back while a reload is applied. It says how many
   * answers it holds in READINESS_GATE.held.
   */
  const FIRST_WORKER_ANSWERS_LATE = `--import=data:text/javascript,${encodeURIComponent(`import cluster from 'node:cluster';
import { existsSync, writeFileSync } from 'node:fs';
if (cluster.isWorker && cluster.worker.id === 1) {
  const held = [];
  const send = process.send.bind(process);
  process.send = (message, ...rest) => {
    if (message && message.type === 'answer' && message.readiness && existsSync(process.env.READINESS_GATE)) {
      held.push(message);
      writeFileSync(process.env.READINESS_GATE + '.held', String(held.length));
    } else send(message, ...rest);
    return true;
  };
  process.on('message', (message) => {
    if (message && message.type === 'policy') setImmediate(() => held.splice(0).forEach((m) => send(m)));
  });
}`)}`;

  it('stays ready through a reload: an answer given before the new policy is judged against the one accepted when asked', async () => {
    const policyFile = path.join(tempDir(), 'policy.yaml');
    const gate = path.join(tempDir(), 'answer-late');
    writeFileSync(policyFile, SHIPPED_POLICY);
    const g = await startServe({ ...env, WORKERS: '2', POLICY_FILE: policyFile, POLICY_WATCH: 'false', READINESS_GATE: gate, NODE_OPTIONS: FIRST_WORKER_ANSWERS_LATE });
    try {
      // Ready first (the second worker may still be starting when the primary says it listens); what is tested is that it stays so.
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'both workers ready' });
      writeFileSync(gate, '');
      const asked = request(g.adminUrl, '/readyz');
      // The question is with the worker before the reload is asked for.
      await waitFor(() => existsSync(`${gate}.held`), { what: 'the first worker to hold its answer' });
      const changed = `${SHIPPED_POLICY}\n# changed\n`;
      writeFileSync(policyFile, changed);
      process.kill(primaryPid(g), 'SIGHUP');
      const ready = await asked;
      // Both workers moved to the new policy, the first after it had answered.
      await waitFor(() => logEntries(g).filter((e) => e.event === 'policy_applied' && e.to === sha256(changed)).length === 2, { what: 'both workers to apply it' });
      expect([ready.status, JSON.parse(ready.body.toString()).checks]).toEqual([200, { policy: 'ok', key_store: 'ok', shutdown: 'no', workers: 'ok' }]);
      rmSync(gate);
      expect((await request(g.adminUrl, '/readyz')).status).toBe(200);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 30_000);

  it('tries a replacement that cannot start again while the other worker serves, until it can', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const gate = path.join(tempDir(), 'closed');
    const g = await startServe({ ...env, WORKERS: '2', WORKER_GATE: gate }, { script: 'test/fixtures/gated-serve.mjs' });
    try {
      const [victim, survivor] = workerPids(g) as [number, number];
      writeFileSync(gate, '');
      process.kill(victim, 'SIGKILL');
      const failed = await waitFor(() => logEntries(g).find((e) => e.event === 'replacement_failed'), { timeoutMs: 10_000, what: 'the failed replacement' });
      // The victim's quick death paused 1 s; this second one in a row pauses 2 s.
      expect(failed).toMatchObject({ level: 50, serving: 1, pause_ms: 2_000, code: 3 });
      expect(alive(survivor)).toBe(true);
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
      const ready = await request(g.adminUrl, '/readyz');
      expect([ready.status, JSON.parse(ready.body.toString()).checks.workers]).toEqual([503, 'missing']);
      rmSync(gate);
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 20_000, what: 'readiness once a replacement can start' });
      // (Its lines reach stdout within 200 ms of being written.)
      await waitFor(() => logEntries(g).some((e) => e.event === 'worker_listening' && e.pid !== survivor && e.pid !== victim), { what: "the new worker's line" });
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 60_000);

  it('tries again a replacement that fails while the first workers are still starting', async () => {
    // Worker 1 listens and dies while worker 2 is held back; its replacements cannot start until the
    // gate opens. Once worker 2 starts, the gateway runs, and a replacement must come with it: not one
    // worker short for good, never ready.
    const dir = tempDir();
    const [gate, hold] = [path.join(dir, 'closed'), path.join(dir, 'held')];
    writeFileSync(gate, '');
    writeFileSync(hold, '');
    const g = await startServe(
      { ...env, WORKERS: '2', WORKER_GATE: gate, WORKER_GATE_FROM_ID: '3', WORKER_HOLD: hold },
      { script: 'test/fixtures/gated-serve.mjs', listeningEvent: 'worker_listening' },
    );
    try {
      const first = logEntries(g).find((e) => e.event === 'worker_listening')!.pid as number;
      process.kill(first, 'SIGKILL');
      await waitFor(() => logEntries(g).find((e) => e.event === 'replacement_failed'), { timeoutMs: 10_000, what: 'a replacement to fail while the start goes on' });
      rmSync(gate);
      rmSync(hold);
      const listening = await waitFor(() => logEntries(g).find((e) => e.event === 'listening'), { timeoutMs: 10_000, what: 'the gateway to run' });
      await waitFor(async () => (await request(`http://127.0.0.1:${listening.admin_port as number}`, '/readyz')).status === 200, { timeoutMs: 15_000, what: 'every worker to be there' });
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 60_000);

  it('kills a replacement stuck before it listens, and tries again until one starts', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const gate = path.join(tempDir(), 'closed');
    const g = await startServe({ ...env, WORKERS: '2', WORKER_GATE: gate, WORKER_GATE_HANG: '1', WORKER_UNRESPONSIVE_MS: '4000' }, { script: 'test/fixtures/gated-serve.mjs' });
    try {
      const [victim, survivor] = workerPids(g) as [number, number];
      writeFileSync(gate, '');
      process.kill(victim, 'SIGKILL');
      const killed = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_start_timeout'), { timeoutMs: 15_000, what: 'the stuck replacement to be killed' });
      expect(killed).toMatchObject({ level: 50, deadline_ms: 4_000, pid: primaryPid(g) });
      const failed = await waitFor(() => logEntries(g).find((e) => e.event === 'replacement_failed' && e.worker_pid === killed.worker_pid), { what: 'the failure to be counted' });
      expect(failed).toMatchObject({ signal: 'SIGKILL', serving: 1 });
      expect(alive(killed.worker_pid as number)).toBe(false);
      rmSync(gate);
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 20_000, what: 'readiness once a replacement can start' });
      expect(alive(survivor)).toBe(true);
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 60_000);

  it('keeps the summed counters from going backwards when a worker stops answering or dies', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    const series = 'acquirer_gateway_requests_total{route="eod_statements_list",method="GET",status="200"}';
    const scrape = async () => metric((await request(g.adminUrl, '/metrics')).body.toString(), series);
    try {
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'readiness' });
      const [victim, other] = workerPids(g) as [number, number];
      expect(await burst(g, key, 20)).toEqual(Array(20).fill(200));
      await waitFor(() => logEntries(g).filter((e) => e.event === 'request').length === 20, { what: 'the access lines' });
      const servedByVictim = logEntries(g).filter((e) => e.event === 'request' && e.pid === victim).length;
      expect(servedByVictim).toBeGreaterThan(0); // else its share could not go missing
      expect(await scrape()).toBe(20);

      // Stopped, it cannot answer within the primary's second: the counters of its last answer stand
      // in, its gauges do not (the summed resident memory is the other worker's alone).
      process.kill(victim, 'SIGSTOP');
      try {
        const text = (await request(g.adminUrl, '/metrics')).body.toString();
        expect(metric(text, series)).toBe(20);
        const ratio = metric(text, 'acquirer_gateway_process_resident_memory_bytes') / vmRss(other);
        expect(ratio).toBeGreaterThan(0.75);
        expect(ratio).toBeLessThan(1.3);
      } finally {
        process.kill(victim, 'SIGCONT');
      }

      process.kill(victim, 'SIGKILL');
      const replaced = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_replaced' && e.worker_pid === victim), { timeoutMs: 10_000, what: 'the replacement' });
      expect(await scrape()).toBe(20);
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { timeoutMs: 10_000, what: 'readiness with the replacement' });
      expect(await burst(g, key, 10)).toEqual(Array(10).fill(200));
      const text = (await request(g.adminUrl, '/metrics')).body.toString();
      expect(metric(text, series)).toBe(30);
      // The dead worker's gauges are gone: the live two's memory, not three.
      const live = vmRss(other) + vmRss(replaced.replacement_pid as number);
      const ratio = metric(text, 'acquirer_gateway_process_resident_memory_bytes') / live;
      expect(ratio).toBeGreaterThan(0.75);
      expect(ratio).toBeLessThan(1.3);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  }, 40_000);

  it('kills and replaces a worker that stops answering, and keeps serving', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2', WORKER_UNRESPONSIVE_MS: '4000' });
    const [victim] = workerPids(g) as [number, number];
    try {
      process.kill(victim, 'SIGSTOP'); // alive, and deaf
      const killed = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_unresponsive'), { timeoutMs: 15_000, what: 'the silent worker to be killed' });
      expect(killed).toMatchObject({ level: 50, worker_pid: victim, pid: primaryPid(g), unanswered: 2, every_ms: 2_000 });
      const replaced = await waitFor(() => logEntries(g).find((e) => e.event === 'worker_replaced' && e.worker_pid === victim), { timeoutMs: 10_000, what: 'the replacement' });
      expect(replaced).toMatchObject({ signal: 'SIGKILL' });
      await waitFor(() => logEntries(g).some((e) => e.event === 'worker_listening' && e.pid === replaced.replacement_pid), { timeoutMs: 10_000, what: 'the replacement to listen' });
      expect(await burst(g, key, 20)).toEqual(Array(20).fill(200));
    } finally {
      killIfAlive(victim);
      await g.stop();
    }
  }, 30_000);

  it('counts a worker that hung as soon as it started as a quick death, though the kill comes 10 s later', async () => {
    // With the default WORKER_UNRESPONSIVE_MS the kill comes about 10 s after the hang: a worker that
    // hangs at once (on a poisoned first request, say) must still be replaced after a pause, not
    // straight away, or such workers are forked again and again with no pause at all.
    const g = await startServe({ ...env, WORKERS: '2' });
    const [victim] = workerPids(g) as [number, number];
    try {
      process.kill(victim, 'SIGSTOP');
      const paused = await waitFor(
        () => logEntries(g).find((e) => e.event === 'worker_died_soon' && e.worker_pid === victim),
        { timeoutMs: 20_000, what: 'the hung worker to be killed and its replacement paused' },
      );
      expect(paused).toMatchObject({ signal: 'SIGKILL', pause_ms: 1_000 });
      // Killed after about 10 s of questions unanswered: those seconds are not counted as serving.
      expect((paused.lived_ms as number) - (paused.answered_for_ms as number)).toBeGreaterThanOrEqual(6_000);
    } finally {
      killIfAlive(victim);
      await g.stop();
    }
  }, 30_000);

  it('closes connections past MAX_CONNECTIONS in each worker, as a single process does, never handing them round', async () => {
    const g = await startServe({ ...env, WORKERS: '2', MAX_CONNECTIONS: '1' });
    const sockets: net.Socket[] = [];
    try {
      // Two workers of one each hold two; of four, two are closed, whichever worker each came to.
      const closed = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const socket = await new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(g.port, '127.0.0.1', () => resolve(s));
            s.on('error', reject);
          });
          sockets.push(socket);
          return socket;
        }),
      ).then(() =>
        waitFor(() => (sockets.filter((s) => s.closed).length >= 2 ? sockets.filter((s) => s.closed).length : undefined), { what: 'two connections to be closed' }),
      );
      expect(closed).toBe(2);
      const dropped = await waitFor(async () => {
        const value = metric((await request(g.adminUrl, '/metrics')).body.toString(), 'acquirer_gateway_connections_dropped_total');
        return value === 2 ? value : undefined;
      }, { what: 'the drops to be counted' });
      expect(dropped).toBe(2);
    } finally {
      for (const socket of sockets) socket.destroy();
      await g.stop();
    }
  }, 30_000);

  it('while Redis is down, is not ready for the key store, and says every worker is there', async () => {
    const relay = await startTcpProxy(redis.url);
    const g = await startServe({ ...env, REDIS_URL: relay.url, WORKERS: '2' });
    try {
      await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'readiness' });
      await relay.cut();
      const checks = await waitFor(
        async () => {
          const ready = await request(g.adminUrl, '/readyz');
          return ready.status === 503 ? JSON.parse(ready.body.toString()).checks : undefined;
        },
        { what: 'readiness to drop' },
      );
      expect(checks).toEqual({ policy: 'ok', key_store: 'unavailable', shutdown: 'no', workers: 'ok' });
    } finally {
      await g.stop();
      await relay.close();
    }
  }, 30_000);

  it('drains every worker on SIGTERM: a request in flight completes, then all processes exit 0', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const pids = workerPids(g);
      const { inFlight, release } = await holdRequestInFlight(g, key);
      const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
      g.child.kill('SIGTERM');
      await waitFor(async () => (await request(g.adminUrl, '/readyz').catch(() => ({ status: 0 }))).status === 503, { what: 'readiness to drop' });
      release();
      expect(await inFlight).toEqual({ status: 200, body: '{"eod_statements":[]}' });
      expect(await exited).toBe(0);
      expect(pids.some(alive)).toBe(false);
    } finally {
      upstream.handle(answerList);
      await g.stop();
    }
  }, 30_000);

  it('counts a worker killed while it drains as a failed shutdown: the primary exits 1', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const pids = workerPids(g);
      const { inFlight } = await holdRequestInFlight(g, key);
      const cut = inFlight.then(() => 'completed', () => 'cut');
      const exited = new Promise<number | null>((resolve) => g.child.once('exit', resolve));
      g.child.kill('SIGTERM');
      await waitFor(() => logEntries(g).some((e) => e.event === 'shutting_down'), { what: 'a worker to start draining' });
      // The one holding the request is still draining; the other may be gone already.
      for (const pid of pids) killIfAlive(pid);
      expect(await cut).toBe('cut');
      expect(await exited).toBe(1);
      const stopped = await waitFor(() => logEntries(g).find((e) => e.event === 'stopped' && e.pid === primaryPid(g)), { what: 'the primary\'s last line' });
      expect(stopped.failed_workers).toBeGreaterThanOrEqual(1);
    } finally {
      upstream.handle(answerList);
      await g.stop();
    }
  }, 30_000);

  it('lets every worker drain and go when the primary is killed outright', async () => {
    const { key } = await createKey(env, { acquirer: 'acq_workers', permissions: ['eod_list', 'eod_read'] });
    const g = await startServe({ ...env, WORKERS: '2' });
    try {
      const pids = workerPids(g);
      const { inFlight, release } = await holdRequestInFlight(g, key);
      g.child.kill('SIGKILL');
      await waitFor(() => logEntries(g).some((e) => e.event === 'shutting_down'), { what: 'a worker to start draining' });
      release();
      expect(await inFlight).toEqual({ status: 200, body: '{"eod_statements":[]}' });
      await waitFor(() => !pids.some(alive), { timeoutMs: 10_000, what: 'the orphaned workers to exit' });
    } finally {
      upstream.handle(answerList);
      for (const pid of workerPids(g).filter(alive)) process.kill(pid, 'SIGKILL');
    }
  }, 30_000);

  it('refuses a bad WORKERS value with the variable named, and a bad policy once, before forking', async () => {
    const bad = await runCli(['serve'], { ...env, WORKERS: 'many' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('WORKERS: must be auto or an integer from 1 to 256 (got "many")');
    const policy = await runCli(['serve'], { ...env, WORKERS: '2', POLICY_FILE: 'does/not/exist.yaml', PORT: '0', ADMIN_PORT: '0' });
    expect(policy.code).not.toBe(0);
    expect(policy.stderr.match(/policy refused/g)).toHaveLength(1);
  }, 30_000);
});
