// Load generators. wrk (Debian's package) when it is on PATH, else autocannon; each runs as its own
// process under bash, whose `times` reports the generator's CPU: on two cores it competes with what
// it measures, so every result carries it.
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const REPORT_LUA = path.join(here, '..', 'report.lua');
const AUTOCANNON = path.join(here, '..', 'node_modules', 'autocannon', 'autocannon.js');

/** `BENCH_LOAD_GENERATOR=autocannon` forces the fallback (to check it where wrk is installed). */
export const loadGenerator = process.env.BENCH_LOAD_GENERATOR ?? (spawnSync('wrk', ['--version']).error === undefined ? 'wrk' : 'autocannon');
if (loadGenerator !== 'wrk' && loadGenerator !== 'autocannon') throw new Error(`BENCH_LOAD_GENERATOR: wrk or autocannon, not ${loadGenerator}`);

/** `0m1.230s` → seconds. */
const bashSeconds = (s) => {
  const m = /^(\d+)m([\d.]+)s$/.exec(s);
  return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
};

function runUnderBash(command, args, env = {}) {
  const quoted = [command, ...args].map((a) => `'${String(a).replaceAll("'", `'\\''`)}'`).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `${quoted}; rc=$?; times; exit $rc`], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${command} exited with ${code}: ${err.trim()}`));
      const lines = out.trim().split('\n');
      // `times`: the shell's user and system time, then its children's.
      const [user, sys] = lines.at(-1).trim().split(/\s+/).map(bashSeconds);
      resolve({ output: lines.slice(0, -2).join('\n'), cpuSeconds: user + sys });
    });
  });
}

/**
 * Drives `connections` keep-alive connections at `url` for `durationS` seconds, each request a GET,
 * or `method` with the bytes of `bodyFile` as its body.
 * Returns requests, rps, p50/p99 in ms, failures (non-2xx and socket errors) and the generator's CPU
 * as a share of one core.
 */
export async function drive({ url, headers = {}, connections, durationS, method, bodyFile }) {
  const started = process.hrtime.bigint();
  let result;
  if (loadGenerator === 'wrk') {
    const args = ['-t1', `-c${connections}`, `-d${durationS}s`, '--timeout', '10s', '-s', REPORT_LUA];
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
    const { output, cpuSeconds } = await runUnderBash('wrk', [...args, url], method === undefined ? {} : { BENCH_WRK_METHOD: method, BENCH_WRK_BODY_FILE: bodyFile });
    const line = output.split('\n').find((l) => l.startsWith('{'));
    if (line === undefined) throw new Error(`wrk gave no summary line (${url}): ${output}`);
    const s = JSON.parse(line);
    result = {
      requests: s.requests,
      rps: s.requests / (s.duration_us / 1e6),
      p50: s.p50_us / 1000,
      p99: s.p99_us / 1000,
      failures: s.status_errors + s.connect_errors + s.read_errors + s.write_errors + s.timeouts,
      cpuSeconds,
    };
  } else {
    const args = ['--json', '-c', connections, '-d', durationS, ...(method === undefined ? [] : ['-m', method, '-i', bodyFile])];
    for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}=${v}`);
    const { output, cpuSeconds } = await runUnderBash(process.execPath, [AUTOCANNON, ...args, url]);
    const s = JSON.parse(output);
    // autocannon reports latency in whole milliseconds: too coarse for the 1-connection targets.
    result = { requests: s.requests.total, rps: s.requests.average, p50: s.latency.p50, p99: s.latency.p99, failures: s.non2xx + s.errors, cpuSeconds };
  }
  const wallS = Number(process.hrtime.bigint() - started) / 1e9;
  return { ...result, loadCpu: result.cpuSeconds / wallS };
}
