// Benchmark: the gateway against the floor of its stack and the upstream itself, on loopback.
// Every figure is a ratio to a reference measured in the same run, rounds interleaved (A B C A B C …).
// Scenarios so far: the JSON list at 1 and at 50 connections. See bench/README.md for what is missing.
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'dist', 'cli.js');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const LIST = '/v1/acquirer/eod_statements';

const freePort = () => new Promise((resolve) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); }); });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function waitFor(check, what, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) { if (await check().catch(() => false)) return; await new Promise((r) => setTimeout(r, 50)); }
  throw new Error(`timed out waiting for ${what}`);
}
const get = (url, headers = {}) => new Promise((resolve, reject) => http.get(url, { headers }, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); }).on('error', reject));

/** Starts a script of this folder as its own process; resolves to its port (its first line of output). */
function startScript(script, ...args) {
  const child = spawn(process.execPath, [path.join(here, script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', (d) => resolve({ child, port: Number(d.toString().trim()) }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

// Every server in its own process: in the load generator's process they would compete with it.
const origin = await startScript('origin.mjs');
const originUrl = `http://127.0.0.1:${origin.port}`;
const floor = await startScript('floor.mjs', originUrl);
const floorPort = floor.port;

// Redis and the gateway, keys made through the CLI.
if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('redis-server is needed on PATH');
const redisPort = await freePort();
const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
const env = { ...process.env, REDIS_URL: `redis://127.0.0.1:${redisPort}`, REDIS_KEY_PREFIX: 'bench:', LOG_LEVEL: 'warn' };
await waitFor(async () => spawnSync('redis-cli', ['-p', String(redisPort), 'ping']).stdout?.toString().includes('PONG'), 'redis');
const created = JSON.parse(spawnSync(process.execPath, [cli, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read'], { env }).stdout.toString());
const gatewayPort = await freePort();
const adminPort = await freePort();
const gateway = spawn(process.execPath, [cli, 'serve'], { env: { ...env, UPSTREAM_URL: originUrl, PORT: String(gatewayPort), HOST: '127.0.0.1', ADMIN_PORT: String(adminPort) }, stdio: 'inherit' });
await waitFor(async () => (await get(`http://127.0.0.1:${adminPort}/readyz`)) === 200, 'gateway readiness');
const auth = { authorization: `Bearer ${created.key}` };
if ((await get(`http://127.0.0.1:${gatewayPort}${LIST}`, auth)) !== 200) throw new Error('the gateway does not answer 200 with the bench key');

const targets = {
  upstream: { url: `${originUrl}${LIST}`, headers: {} },
  floor: { url: `http://127.0.0.1:${floorPort}${LIST}`, headers: auth },
  gateway: { url: `http://127.0.0.1:${gatewayPort}${LIST}`, headers: auth },
};

async function measure({ url, headers }, connections) {
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  const result = await autocannon({ url, headers, connections, duration: DURATION_S, pipelining: 1 });
  const wallUs = Number(process.hrtime.bigint() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, loadCpu: (cpu.user + cpu.system) / wallUs };
}

const rows = [];
for (const connections of [1, 50]) {
  const samples = Object.fromEntries(Object.keys(targets).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, target] of Object.entries(targets)) samples[name].push(await measure(target, connections));
  }
  const med = (name, field) => median(samples[name].map((s) => s[field]));
  rows.push({ connections, med });
}

gateway.kill('SIGTERM');
redis.kill('SIGKILL');
origin.child.kill();
floor.child.kill();

const lines = [
  `| scenario | gateway / floor (rps) | gateway / upstream (rps) | p50 added over upstream | p99 added over upstream | medians: upstream, floor, gateway rps | load generator CPU |`,
  `|---|---|---|---|---|---|---|`,
];
for (const { connections, med } of rows) {
  lines.push(
    `| JSON list, ${connections} conn | ${(med('gateway', 'rps') / med('floor', 'rps')).toFixed(2)}× | ${(med('gateway', 'rps') / med('upstream', 'rps')).toFixed(2)}× | ${(med('gateway', 'p50') - med('upstream', 'p50')).toFixed(2)} ms | ${(med('gateway', 'p99') - med('upstream', 'p99')).toFixed(2)} ms | ${med('upstream', 'rps').toFixed(0)}, ${med('floor', 'rps').toFixed(0)}, ${med('gateway', 'rps').toFixed(0)} | ${(med('gateway', 'loadCpu') * 100).toFixed(0)}% of a core |`,
  );
}
process.stdout.write(`\n${lines.join('\n')}\n\nrounds ${ROUNDS} × ${DURATION_S} s, interleaved; autocannon in this process (wrk not installed); node ${process.version}\n`);
process.exit(0);
