// What the gateway allocates per request, against the floor: each runs alone with V8's sampling heap
// profiler (bench/lib/heap-sampling.mjs) under the JSON list at 50 connections, and the bytes
// allocated are compared function by function, per request. Garbage is what the young-generation
// collector works through, so this finds collector time that a CPU profile only shows as a total.
// Usage (after `npm run build`):
//   node bench/alloc.mjs [seconds=8] [rows=30]
// `BENCH_PROFILE_REQUEST=write` samples the benchmark's write instead (a POST of 1 KiB of JSON).
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drive } from './lib/load.mjs';
import { gatewayCli, startGateway, startRedis, startScript, stopAll, waitFor } from './lib/services.mjs';

const [seconds = '8', rowsArg = '30'] = process.argv.slice(2);
const LIST = '/v1/acquirer/eod_statements';
const HOOK = fileURLToPath(new URL('./lib/heap-sampling.mjs', import.meta.url));
const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-alloc-'));
const WRITES = process.env.BENCH_PROFILE_REQUEST === 'write';
const bodyFile = path.join(dir, 'body.json');
writeFileSync(bodyFile, JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', description: 'x'.repeat(960) }));
/** The request sampled: the JSON list, or the write (bench/run.mjs's `write` scenario). */
const request = WRITES ? { path: '/v1/acquirer/merchants/m_bench/users', method: 'POST', bodyFile, type: { 'content-type': 'application/json' } } : { path: LIST, type: {} };
const load = (url, durationS) => drive({ url: `${url}${request.path}`, headers: { ...headers, ...request.type }, method: request.method, bodyFile: request.bodyFile, connections: 50, durationS });

/** Bytes allocated by function (name and file:line), summed over the sampled profile's tree. */
function allocations(file) {
  const bytes = new Map();
  const walk = (node) => {
    const f = node.callFrame;
    const where = f.url ? ` ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|bench)\//, '$1/')}:${f.lineNumber + 1}` : '';
    const name = `${f.functionName || '(anonymous)'}${where}`;
    bytes.set(name, (bytes.get(name) ?? 0) + node.selfSize);
    for (const child of node.children) walk(child);
  };
  walk(JSON.parse(readFileSync(file, 'utf8')).head);
  return bytes;
}

/** Warms the target up, samples `seconds` of load, and returns requests served while sampling. */
async function sampled(name, url, pid, out) {
  await load(url, 5);
  process.kill(pid, 'SIGUSR2');
  const result = await load(url, Number(seconds));
  process.kill(pid, 'SIGUSR2');
  await waitFor(async () => existsSync(out), `${name}'s heap profile`);
  console.error(`alloc: ${name}: ${result.requests} requests, ${Math.round(result.rps)} requests/s`);
  return { requests: result.requests, bytes: allocations(out) };
}

const origin = await startScript('origin.mjs', String(1024 * 1024));
const redis = await startRedis();
const gwEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench:', UPSTREAM_URL: origin.url };
const { key } = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read,merchant_users_create');
const headers = { authorization: `Bearer ${key}` };

process.env.HEAP_SAMPLING_OUT = path.join(dir, 'floor.heapprofile');
const f = await startScript({ nodeArgs: ['--import', HOOK] }, 'floor.mjs', origin.url);
const floor = await sampled('floor', f.url, f.child.pid, process.env.HEAP_SAMPLING_OUT);

process.env.HEAP_SAMPLING_OUT = path.join(dir, 'gateway.heapprofile');
process.env.BENCH_GATEWAY_NODE_ARGS = `${process.env.BENCH_GATEWAY_NODE_ARGS ?? ''} --import ${HOOK}`;
const g = await startGateway(gwEnv);
const gateway = await sampled('gateway', g.url, g.child.pid, process.env.HEAP_SAMPLING_OUT);
stopAll();

const perRequest = (p, name) => (p.bytes.get(name) ?? 0) / p.requests;
const names = new Set([...floor.bytes.keys(), ...gateway.bytes.keys()]);
const diff = [...names].map((n) => ({ n, g: perRequest(gateway, n), f: perRequest(floor, n) })).sort((a, b) => b.g - b.f - (a.g - a.f));
const total = (p) => [...p.bytes.values()].reduce((a, b) => a + b, 0) / p.requests;
console.log(`Bytes allocated per request (sampled every 4 KiB, freed objects included); profiles in ${dir}\n`);
console.log(`| gateway − floor | gateway | floor | function |\n|---|---|---|---|`);
console.log(`| ${Math.round(total(gateway) - total(floor))} | ${Math.round(total(gateway))} | ${Math.round(total(floor))} | (all) |`);
for (const { n, g: gb, f: fb } of diff.slice(0, Number(rowsArg))) console.log(`| ${Math.round(gb - fb)} | ${Math.round(gb)} | ${Math.round(fb)} | \`${n.replaceAll('|', '\\|')}\` |`);
process.exit(0);
