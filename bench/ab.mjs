// Two or more gateways that differ only in node options or environment, against the floor, in one run: the JSON
// list (or with --write the POST of 1 KiB JSON of `npm run bench`'s write scenario; 50 connections unless told), rounds interleaved (upstream, floor, A, B, …, upstream, floor, A, B, …), so that what this VM
// does meanwhile falls on every variant alike. For a question like "does a larger young generation
// pay?", where a full `npm run bench` per variant would compare runs minutes apart.
// Usage (after `npm run build`):
//   node bench/ab.mjs [--rounds=6] [--seconds=5] [--connections=50] [--write] 'A=' 'B=--max-semi-space-size=16' …
// Each variant is NAME=OPTIONS: space-separated node options, added after the shebang's (as
// BENCH_GATEWAY_NODE_ARGS is), and environment settings for that gateway alone, as VAR=value words
// ('L=LOG_LEVEL=warn' runs one without access lines). Prints, per target, the medians over rounds of requests/s, CPU per
// request (all threads, and the main thread alone: the one whose time bounds requests/s), the
// collector's pauses per request (gateways only, from their /metrics), p50 and p99 (and each over
// the upstream's: what the gateway adds to a request's latency).
import { rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { drive } from './lib/load.mjs';
import { cpuSeconds, gatewayCli, gcPauseSeconds, mainThreadCpuSeconds, startGateway, startRedis, startScript, stopAll } from './lib/services.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => Number(args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const rounds = option('rounds', 6);
const seconds = option('seconds', 5);
const connections = option('connections', 50);
const write = args.includes('--write');
const variants = args.filter((a) => !a.startsWith('--')).map((a) => {
  const at = a.indexOf('=');
  const words = a.slice(at + 1).split(' ').filter(Boolean);
  const isEnv = (w) => /^[A-Z_][A-Z0-9_]*=/.test(w);
  const env = Object.fromEntries(words.filter(isEnv).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]));
  return { name: a.slice(0, at), spec: a.slice(at + 1), nodeArgs: words.filter((w) => !isEnv(w)).join(' '), env };
});
if (variants.length === 0 || variants.some((v) => v.name === '') || !(rounds > 0 && seconds > 0 && connections > 0)) {
  console.error("usage: node bench/ab.mjs [--rounds=6] [--seconds=5] [--connections=50] [--write] 'A=' 'B=--max-semi-space-size=16' …");
  process.exit(2);
}

const LIST = '/v1/acquirer/eod_statements';
/** As run.mjs's write scenario: a merchant user create with a body of exactly 1,024 bytes. */
const WRITE = '/v1/acquirer/merchants/m_bench/users';
const bodyFile = path.join(os.tmpdir(), `acquirer-gateway-ab-${process.pid}.json`);
if (write) {
  const body = { name: 'Ada Lovelace', email: 'ada@example.com', permissions: ['orders_read', '3ds_read'], description: '' };
  body.description = 'x'.repeat(1024 - Buffer.byteLength(JSON.stringify(body)));
  writeFileSync(bodyFile, JSON.stringify(body));
}
const [PATH, request] = write ? [WRITE, { method: 'POST', bodyFile }] : [LIST, {}];
const origin = await startScript('origin.mjs', String(1024 * 1024));
const redis = await startRedis();
const gwEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench:', UPSTREAM_URL: origin.url };
const { key } = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read,merchant_users_create');
const headers = { authorization: `Bearer ${key}`, ...(write ? { 'content-type': 'application/json' } : {}) };

const floor = await startScript('floor.mjs', origin.url);
const targets = [
  { name: 'upstream', url: origin.url, pid: origin.child.pid },
  { name: 'floor', url: floor.url, pid: floor.child.pid },
];
for (const v of variants) {
  process.env.BENCH_GATEWAY_NODE_ARGS = v.nodeArgs;
  const g = await startGateway({ ...gwEnv, ...v.env });
  targets.push({ name: v.name, url: g.url, pid: g.child.pid, adminUrl: g.adminUrl });
}
for (const t of targets) await drive({ url: `${t.url}${PATH}`, headers, ...request, connections: 50, durationS: 5 });

const samples = new Map(targets.map((t) => [t.name, []]));
for (let r = 1; r <= rounds; r++) {
  // Every other round in the reverse order, so that no target always follows the same one.
  for (const t of r % 2 === 1 ? targets : [...targets].reverse()) {
    const before = cpuSeconds(t.pid);
    const mainBefore = mainThreadCpuSeconds(t.pid);
    const gcBefore = t.adminUrl === undefined ? NaN : await gcPauseSeconds(t.adminUrl);
    const s = await drive({ url: `${t.url}${PATH}`, headers, ...request, connections, durationS: seconds });
    if (s.failures > 0) throw new Error(`${t.name}: ${s.failures} failed requests`);
    const perRequestUs = (spent) => (spent / s.requests) * 1e6;
    const cpuUs = perRequestUs(cpuSeconds(t.pid) - before);
    const mainUs = perRequestUs(mainThreadCpuSeconds(t.pid) - mainBefore);
    const gcUs = t.adminUrl === undefined ? NaN : perRequestUs((await gcPauseSeconds(t.adminUrl)) - gcBefore);
    samples.get(t.name).push({ rps: s.rps, cpuUs, mainUs, gcUs, p50: s.p50, p99: s.p99 });
    console.error(`ab: round ${r} ${t.name}: ${Math.round(s.rps)} requests/s, ${cpuUs.toFixed(0)} µs CPU per request (main thread ${mainUs.toFixed(0)}), p50 ${s.p50.toFixed(3)} ms, p99 ${s.p99.toFixed(3)} ms`);
  }
}
stopAll();
rmSync(bodyFile, { force: true });

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const medians = (name) => Object.fromEntries(['rps', 'cpuUs', 'mainUs', 'gcUs', 'p50', 'p99'].map((k) => [k, median(samples.get(name).map((s) => s[k]))]));
const f = medians('floor');
/**
 * The median over rounds of each round's requests/s over the floor's in the same round. This VM's
 * speed drifts within seconds, and a ratio taken round by round carries less of that than the ratio
 * of two medians: with short rounds (`--seconds=2 --rounds=16`), two processes of one build came
 * within about five hundredths of each other (docs/performance.md, 2026-11-28).
 */
const paired = (name) => median(samples.get(name).map((s, i) => s.rps / samples.get('floor')[i].rps));
const u = medians('upstream');
const ms = (x) => x.toFixed(3);
const over = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(3)}`;
console.log(`${write ? 'POST of 1 KiB JSON' : 'JSON list'}, ${connections} connection(s), ${rounds} interleaved rounds of ${seconds} s (medians)\n`);
console.log('| target | options | requests/s | × floor | × floor, paired | CPU µs/request | × floor | main thread µs/request | × floor | collector pauses µs/request | p50 ms (over upstream) | p99 ms (over upstream) |\n|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const t of targets) {
  const m = medians(t.name);
  const opts = variants.find((v) => v.name === t.name)?.spec;
  const shown = opts === undefined ? '' : `\`${opts || '(shebang only)'}\``;
  const gc = Number.isNaN(m.gcUs) ? '' : m.gcUs.toFixed(1);
  console.log(`| ${t.name} | ${shown} | ${Math.round(m.rps)} | ${(m.rps / f.rps).toFixed(2)} | ${paired(t.name).toFixed(2)} | ${m.cpuUs.toFixed(0)} | ${(m.cpuUs / f.cpuUs).toFixed(2)} | ${m.mainUs.toFixed(0)} | ${(m.mainUs / f.mainUs).toFixed(2)} | ${gc} | ${ms(m.p50)} (${over(m.p50 - u.p50)}) | ${ms(m.p99)} (${over(m.p99 - u.p99)}) |`);
}
