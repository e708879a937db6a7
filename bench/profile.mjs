// Where the gateway's CPU goes, against the floor's: each runs alone under `node --cpu-prof` with the
// JSON list at 50 connections, then the two profiles are compared function by function, in µs of
// self time per request. Usage (after `npm run build`):
//   node bench/profile.mjs [seconds=10] [rows=30]
// `BENCH_PROFILE_NODE_ARGS` adds node options to both processes: `--no-turbo-inlining` splits the
// self time of a function the optimiser inlined (e.g. `addRequest`) among its callees.
// `BENCH_PROFILE_REQUEST=write` profiles the benchmark's write instead (a POST of 1 KiB of JSON).
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { drive } from './lib/load.mjs';
import { gatewayCli, startGateway, startRedis, startScript, stopAll } from './lib/services.mjs';

const [seconds = '10', rowsArg = '30'] = process.argv.slice(2);
const LIST = '/v1/acquirer/eod_statements';
const extraNodeArgs = (process.env.BENCH_PROFILE_NODE_ARGS ?? '').split(' ').filter(Boolean);
const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-profile-'));
const WRITES = process.env.BENCH_PROFILE_REQUEST === 'write';
const bodyFile = path.join(dir, 'body.json');
writeFileSync(bodyFile, JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', description: 'x'.repeat(960) }));
/** The request profiled: the JSON list, or the write (bench/run.mjs's `write` scenario). */
const request = WRITES ? { path: '/v1/acquirer/merchants/m_bench/users', method: 'POST', bodyFile, type: { 'content-type': 'application/json' } } : { path: LIST, type: {} };

/** Self time by function (name and file:line), in µs, from a .cpuprofile. */
function selfTimes(file) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const f = byId.get(profile.samples[i]).callFrame;
    const where = f.url ? ` ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|bench)\//, '$1/')}:${f.lineNumber + 1}` : '';
    const name = `${f.functionName || '(anonymous)'}${where}`;
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  self.delete('(idle)');
  return self;
}

async function profiled(name, start) {
  const target = await start();
  const result = await drive({ url: `${target.url}${request.path}`, headers: { ...target.headers, ...request.type }, method: request.method, bodyFile: request.bodyFile, connections: 50, durationS: Number(seconds) });
  await target.stop();
  const file = readdirSync(target.dir).find((f) => f.endsWith('.cpuprofile'));
  console.error(`profile: ${name}: ${result.requests} requests, ${Math.round(result.rps)} requests/s`);
  return { requests: result.requests, self: selfTimes(path.join(target.dir, file)) };
}

const origin = await startScript('origin.mjs', String(1024 * 1024));
const redis = await startRedis();
const gwEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench:', UPSTREAM_URL: origin.url };
const { key } = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read,merchant_users_create');
const headers = { authorization: `Bearer ${key}` };

const floor = await profiled('floor', async () => {
  const floorDir = path.join(dir, 'floor');
  const s = await startScript({ nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${floorDir}`, ...extraNodeArgs] }, 'floor.mjs', origin.url);
  const stop = () => new Promise((resolve) => (s.child.once('exit', resolve), s.child.kill('SIGTERM')));
  return { url: s.url, headers, dir: floorDir, stop };
});
const gateway = await profiled('gateway', async () => {
  const gwDir = path.join(dir, 'gateway');
  process.env.BENCH_CPU_PROF = gwDir;
  process.env.BENCH_GATEWAY_NODE_ARGS = [process.env.BENCH_GATEWAY_NODE_ARGS ?? '', ...extraNodeArgs].join(' ');
  const g = await startGateway(gwEnv);
  return { url: g.url, headers, dir: gwDir, stop: () => g.stop() };
});
stopAll();

const perRequest = (p, name) => (p.self.get(name) ?? 0) / p.requests;
const names = new Set([...floor.self.keys(), ...gateway.self.keys()]);
const diff = [...names].map((n) => ({ n, g: perRequest(gateway, n), f: perRequest(floor, n) })).sort((a, b) => b.g - b.f - (a.g - a.f));
const total = (p) => [...p.self.values()].reduce((a, b) => a + b, 0) / p.requests;
console.log(`Self time per request (µs), busy time only; profiles in ${dir}\n`);
console.log(`| gateway − floor | gateway | floor | function |\n|---|---|---|---|`);
console.log(`| ${(total(gateway) - total(floor)).toFixed(1)} | ${total(gateway).toFixed(1)} | ${total(floor).toFixed(1)} | (all) |`);
for (const { n, g, f } of diff.slice(0, Number(rowsArg))) console.log(`| ${(g - f).toFixed(1)} | ${g.toFixed(1)} | ${f.toFixed(1)} | \`${n.replaceAll('|', '\\|')}\` |`);
