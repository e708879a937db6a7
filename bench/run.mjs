// The benchmark: the gateway against the floor of its stack (bare Express + http-proxy-middleware),
// nginx with a static key check, and the upstream itself, all on loopback, each its own process.
// Every figure is a ratio to (or a difference from) a reference measured in the same run, with rounds
// interleaved (A B C, C B A, …); medians of the absolute numbers follow for the record.
// Settings: see bench/README.md.
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { drive, loadGenerator } from './lib/load.mjs';
import { measureFleet } from './fleet.mjs';
import { measureLimitsAccuracy, measureLimitsCost } from './limits.mjs';
import { measureVerdicts } from './verdicts.mjs';
import { cpuSeconds, gatewayCli, get, peakRssDuring, rss, startGateway, startNginx, startRedis, startScript, stopAll } from './lib/services.mjs';

const env = process.env;
const ROUNDS = Number(env.BENCH_ROUNDS ?? 5);
const DURATION_S = Number(env.BENCH_DURATION_S ?? 5);
const WARMUP_S = Number(env.BENCH_WARMUP_S ?? 5);
const CSV_BYTES = Number(env.BENCH_CSV_BYTES ?? 1024 ** 3);
const FLOOD_REQUESTS = Number(env.BENCH_FLOOD_REQUESTS ?? 10_000);
const SOAK_REQUESTS = Number(env.BENCH_SOAK_REQUESTS ?? 1_000_000);
const SOAK_CHUNK_S = Number(env.BENCH_SOAK_CHUNK_S ?? 10);
const SOAK_CONNECTIONS = Number(env.BENCH_SOAK_CONNECTIONS ?? 10);
const WRITE_SOAK_REQUESTS = Number(env.BENCH_WRITE_SOAK_REQUESTS ?? 200_000);
const FLEET_SECONDS = Number(env.BENCH_FLEET_SECONDS ?? 15);
const FLEET_DISABLES = Number(env.BENCH_FLEET_DISABLES ?? 5);
const LIMITS_SECONDS = Number(env.BENCH_LIMITS_SECONDS ?? 10);
const LIMITS_CONNECTIONS = Number(env.BENCH_LIMITS_CONNECTIONS ?? 4);
const KEY_CACHE_TTL_MS = 60_000; // the gateway's default, which this run keeps
/**
 * prom-client's event-loop figures come from Node's monitorEventLoopDelay, which records the time
 * between its timer's ticks, 10 ms apart: an idle loop shows about 10 ms. The delay is what is over.
 */
const LOOP_SAMPLING_MS = 10;
const delayOf = (metrics) => Math.max(0, metrics.acquirer_gateway_nodejs_eventloop_lag_p99_seconds * 1000 - LOOP_SAMPLING_MS);
const loopDelayP99 = async (gw) => delayOf(await gw.metrics());
const SCENARIOS = new Set((env.BENCH_SCENARIOS ?? 'list,write,burst,csv,flood,verdicts,disable,soak,cores,fleet,limits').split(','));
const LIST = '/v1/acquirer/eod_statements';
const CSV = '/v1/acquirer/eod_statements/00000000-0000-4000-8000-000000000001.csv';
const MiB = 1024 * 1024;
/** A merchant user create, with a body of 1 KiB of JSON (a description makes up the size). */
const WRITE = '/v1/acquirer/merchants/m_bench/users';
const WRITE_BODY_FILE = path.join(os.tmpdir(), `acquirer-gateway-bench-${process.pid}.json`);
const writeBody = (bytes) => {
  const body = { name: 'Ada Lovelace', email: 'ada@example.com', permissions: ['orders_read', '3ds_read'], description: '' };
  body.description = 'x'.repeat(bytes - Buffer.byteLength(JSON.stringify(body)));
  return JSON.stringify(body);
};
writeFileSync(WRITE_BODY_FILE, writeBody(1024));
const WRITE_OPTIONS = { method: 'POST', bodyFile: WRITE_BODY_FILE };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const log = (...args) => console.error('bench:', ...args);
const rows = [];
/** One line of the results table. `met` is true, false, or null where there is no target. */
const row = (scenario, figure, gateway, reference, comparison, target = '', met = null) =>
  rows.push({ scenario, figure, gateway, reference, comparison, target, met });

/**
 * Runs `measure` for every target, ROUNDS times, interleaved; returns the samples by target name.
 * Every other round runs in the reverse order, so that no target always follows the same one: in
 * one fixed order the gateway, last in the list, always ran right after nginx.
 */
async function interleaved(targets, measure, rounds = ROUNDS) {
  const samples = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    const inOrder = Object.entries(targets);
    for (const [name, target] of round % 2 === 0 ? inOrder : inOrder.reverse()) {
      const sample = await measure(target, name);
      samples[name].push(sample);
      // Each round on stderr: on a shared VM the spread between rounds says how far to trust a median.
      const shown = Object.entries(sample).filter(([k, v]) => typeof v === 'number' && /^(rps|cpuUs|p50|p99|mibs)$/.test(k));
      if (shown.length > 0) log(`  round ${round + 1} ${name}: ${shown.map(([k, v]) => `${k} ${v.toFixed(k === 'p50' || k === 'p99' ? 3 : 0)}`).join(', ')}`);
    }
  }
  return samples;
}
const med = (samples, field) => Object.fromEntries(Object.entries(samples).map(([name, xs]) => [name, median(xs.map((x) => x[field]))]));

// ---------------------------------------------------------------------------------------------------
// The processes.
const origin = await startScript('origin.mjs', String(CSV_BYTES));
const floor = await startScript('floor.mjs', origin.url);
// The same floor in a second process: identical processes differ by up to a tenth in requests/s on
// this VM (code placement, the JIT's choices, where the scheduler puts them), and the list rows show
// by how much in this run, so a ratio to the floor is read against that band (docs/performance.md, "Two processes of one build").
const floorB = await startScript('floor.mjs', origin.url);
const redis = await startRedis();
const gwEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench:', UPSTREAM_URL: origin.url };
const benchKey = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read,merchant_users_create');
const auth = { authorization: `Bearer ${benchKey.key}` };
const gateway = await startGateway(gwEnv);
const nginx = await startNginx(origin.port, benchKey.key);
if (nginx === null) log('nginx is not installed (Debian: apt-get install nginx-light): no nginx reference in this run');
for (const [name, url] of [['gateway', gateway.url], ['floor', floor.url], ...(nginx ? [['nginx', nginx.url]] : [])]) {
  const { status } = await get(`${url}${LIST}`, auth);
  if (status !== 200) throw new Error(`${name} answers ${status} to the bench key`);
}

const listTargets = {
  upstream: { url: `${origin.url}${LIST}`, pid: origin.child.pid },
  floor: { url: `${floor.url}${LIST}`, headers: auth, pid: floor.child.pid },
  'floor B': { url: `${floorB.url}${LIST}`, headers: auth, pid: floorB.child.pid },
  ...(nginx ? { nginx: { url: `${nginx.url}${LIST}`, headers: auth, pid: nginx.child.pid } } : {}),
  gateway: { url: `${gateway.url}${LIST}`, headers: auth, pid: gateway.child.pid },
};
/** drive(), plus the CPU the target's processes used per request (µs): steadier than rps on shared cores. */
async function driveMeasuringCpu(target, options) {
  const before = cpuSeconds(target.pid);
  const r = await drive({ ...target, ...options });
  return { ...r, cpuUs: ((cpuSeconds(target.pid) - before) / r.requests) * 1e6 };
}
const refs = (m, unit, digits = 0) => Object.entries(m).filter(([n]) => n !== 'gateway').map(([n, v]) => `${n} ${v.toFixed(digits)}${unit}`).join(', ');
const loadCpuNote = (samples) => `load generator CPU ${Math.round(median(samples.gateway.map((s) => s.loadCpu)) * 100)}% of a core`;

// ---------------------------------------------------------------------------------------------------
// JSON list at 1 and at 50 connections; Redis commands issued while the gateway served a cached key.
if (SCENARIOS.has('list')) {
  // Untimed first: a cold process pays for compiling its code in its first rounds, and the gateway,
  // with more code than the floor, pays more. What is compared is each one warm, as in service.
  log(`JSON list: warm-up, ${WARMUP_S} s per target`);
  for (const target of Object.values(listTargets)) await drive({ ...target, connections: 50, durationS: WARMUP_S });
  for (const connections of [1, 50]) {
    log(`JSON list, ${connections} connection(s)`);
    let gatewayRequests = 0;
    let gatewayCommands = 0;
    let gatewayPings = 0;
    const scenarioStarted = Date.now();
    const samples = await interleaved(listTargets, async (target, name) => {
      const before = redis.commands();
      if (name === 'gateway') await gateway.metrics(); // resets the event-loop delay histogram
      const r = await driveMeasuringCpu(target, { connections, durationS: DURATION_S });
      if (r.failures > 0) throw new Error(`${name}: ${r.failures} failed requests`);
      if (name === 'gateway') {
        r.loopDelayP99 = await loopDelayP99(gateway);
        const after = redis.commands();
        gatewayCommands += after.other - before.other;
        gatewayPings += after.pings - before.pings;
        gatewayRequests += r.requests;
      }
      return r;
    });
    // A cached key is fetched again once per KEY_CACHE_TTL_MS (its refresh, not a per-request cost).
    const refreshes = Math.ceil((Date.now() - scenarioStarted) / KEY_CACHE_TTL_MS);
    const rps = med(samples, 'rps');
    const p50 = med(samples, 'p50');
    const p99 = med(samples, 'p99');
    const ratio = rps.gateway / rps.floor;
    const scenario = `JSON list, ${connections} conn`;
    const sameCode = `floor B, the same code in a second process: ${(rps['floor B'] / rps.floor).toFixed(2)}× floor`;
    row(scenario, 'requests/s', rps.gateway.toFixed(0), refs(rps, ''), `${ratio.toFixed(2)}× floor${nginx ? `, ${(rps.gateway / rps.nginx).toFixed(2)}× nginx` : ''} (${sameCode})`, connections === 50 ? '≥ 0.9× floor' : '', connections === 50 ? ratio >= 0.9 : null);
    const cpuUs = med(samples, 'cpuUs');
    row(scenario, 'CPU per request (its own processes)', `${cpuUs.gateway.toFixed(0)} µs`, refs(cpuUs, ' µs'), `${(cpuUs.gateway / cpuUs.floor).toFixed(2)}× floor`);
    const addedP50 = p50.gateway - p50.upstream;
    const addedP99 = p99.gateway - p99.upstream;
    row(scenario, 'p50 latency', `${p50.gateway.toFixed(3)} ms`, refs(p50, ' ms', 3), `+${addedP50.toFixed(3)} ms over upstream (floor +${(p50.floor - p50.upstream).toFixed(3)})`, connections === 1 ? '≤ +0.25 ms' : '', connections === 1 ? addedP50 <= 0.25 : null);
    row(scenario, 'p99 latency', `${p99.gateway.toFixed(3)} ms`, refs(p99, ' ms', 3), `+${addedP99.toFixed(3)} ms over upstream (floor +${(p99.floor - p99.upstream).toFixed(3)})`, connections === 1 ? '≤ +1 ms' : '', connections === 1 ? addedP99 <= 1 : null);
    row(scenario, 'Redis commands per request (cached key)', (gatewayCommands / gatewayRequests).toFixed(6), '', `${gatewayCommands} commands in ${gatewayRequests} requests: the key's TTL refresh, at most ${refreshes} in this scenario's ${((Date.now() - scenarioStarted) / 1000).toFixed(0)} s (and ${gatewayPings} health-check pings, one per connection per second)`, '0 per request', gatewayCommands <= refreshes);
    row(scenario, 'event-loop delay p99', `${median(samples.gateway.map((s) => s.loopDelayP99)).toFixed(2)} ms`, '', connections === 50 ? 'at saturation: each turn of the loop carries a batch of requests' : '');
    row(scenario, 'load generator', loadGenerator, '', loadCpuNote(samples));
  }
}

// ---------------------------------------------------------------------------------------------------
// A write: a POST of 1 KiB of JSON to a route that takes a body, at 50 connections, against the same
// POST through the floor (which streams the body on unread); then a soak of such writes for memory.
if (SCENARIOS.has('write')) {
  const headers = { ...auth, 'content-type': 'application/json' };
  const writeTargets = {
    floor: { url: `${floor.url}${WRITE}`, headers, pid: floor.child.pid },
    'floor B': { url: `${floorB.url}${WRITE}`, headers, pid: floorB.child.pid },
    gateway: { url: `${gateway.url}${WRITE}`, headers, pid: gateway.child.pid },
  };
  log(`write: warm-up, ${WARMUP_S} s per target`);
  for (const target of Object.values(writeTargets)) await drive({ ...target, ...WRITE_OPTIONS, connections: 50, durationS: WARMUP_S });
  const samples = await interleaved(writeTargets, async (target, name) => {
    const r = await driveMeasuringCpu(target, { ...WRITE_OPTIONS, connections: 50, durationS: DURATION_S });
    if (r.failures > 0) throw new Error(`write ${name}: ${r.failures} failed requests`);
    return r;
  });
  const rps = med(samples, 'rps');
  const cpuUs = med(samples, 'cpuUs');
  const ratio = rps.gateway / rps.floor;
  const scenario = 'POST of 1 KiB JSON, 50 conn';
  row(scenario, 'requests/s', rps.gateway.toFixed(0), refs(rps, ''), `${ratio.toFixed(2)}× floor (floor B ${(rps['floor B'] / rps.floor).toFixed(2)}× floor)`, '≥ 0.9× floor', ratio >= 0.9);
  row(scenario, 'CPU per request (its own processes)', `${cpuUs.gateway.toFixed(0)} µs`, refs(cpuUs, ' µs'), `${(cpuUs.gateway / cpuUs.floor).toFixed(2)}× floor`);
  await soak('write soak', WRITE_SOAK_REQUESTS, { url: `${gateway.url}${WRITE}`, headers, ...WRITE_OPTIONS });
}

// ---------------------------------------------------------------------------------------------------
// A burst, then ordinary load, on a fresh gateway. V8 once answered a burst by allocating per-request
// objects in the old generation for good, and the process then ran a full collection every half
// second (docs/performance.md, "Node flags"): this shows whether a burst still leaves that behind.
if (SCENARIOS.has('burst')) {
  log('burst: a fresh gateway, 5 s at 300 connections, then the JSON list at 50 against the floor');
  const fresh = await startGateway(gwEnv);
  const fullCollections = async () => {
    const { body } = await get(`${fresh.adminUrl}/metrics`);
    return Number(/^acquirer_gateway_nodejs_gc_duration_seconds_count\{kind="major"\} (\d+)$/m.exec(body)?.[1] ?? 0);
  };
  const freshList = { url: `${fresh.url}${LIST}`, headers: auth, pid: fresh.child.pid };
  await drive({ ...freshList, connections: 300, durationS: 5 });
  const before = await fullCollections();
  const samples = await interleaved({ floor: listTargets.floor, gateway: freshList }, (target) => driveMeasuringCpu(target, { connections: 50, durationS: DURATION_S }));
  const after = await fullCollections();
  await fresh.stop();
  const cpuUs = med(samples, 'cpuUs');
  const scenario = 'burst: 5 s at 300 conn, then the list at 50';
  row(scenario, `full collections in ${ROUNDS * DURATION_S} s at 50 conn`, String(after - before), '', 'none or one in a normal process; one every second or so in a process the burst left collecting');
  row(scenario, 'CPU per request', `${cpuUs.gateway.toFixed(0)} µs`, `floor ${cpuUs.floor.toFixed(0)} µs`, `${(cpuUs.gateway / cpuUs.floor).toFixed(2)}× floor`);
}

// ---------------------------------------------------------------------------------------------------
// The CSV download: MiB/s, bytes identical, and the gateway's peak RSS over its idle RSS.
/** Downloads url; resolves to bytes, seconds and (when asked) the SHA-256 of the body. */
function download(url, headers, hash) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    http
      .get(url, { headers, agent: false }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`${url}: status ${res.statusCode}`));
        const digest = hash ? createHash('sha256') : null;
        let bytes = 0;
        res.on('data', (chunk) => {
          bytes += chunk.length;
          digest?.update(chunk);
        });
        res.once('end', () => resolve({ bytes, seconds: Number(process.hrtime.bigint() - started) / 1e9, sha256: digest?.digest('hex') }));
        res.once('error', reject);
      })
      .on('error', reject);
  });
}

if (SCENARIOS.has('csv')) {
  log(`CSV download, ${(CSV_BYTES / MiB).toFixed(0)} MiB`);
  const csvTargets = Object.fromEntries(Object.entries(listTargets).filter(([n]) => n !== 'floor B').map(([n, t]) => [n, { ...t, url: t.url.replace(LIST, CSV) }]));
  const expected = (await download(csvTargets.upstream.url, {}, true)).sha256;
  // The first download through each proxy is also its check (hash against the upstream's) and its
  // first-time memory: the allocator and the collector settle during it. Later ones are timed.
  const identical = {};
  const firstGrowth = {};
  const pidOf = { gateway: gateway.child.pid, floor: floor.child.pid };
  for (const [name, t] of Object.entries(csvTargets)) {
    if (name === 'upstream') continue;
    const pid = pidOf[name];
    const idle = pid ? rss(pid) : 0;
    const { result: copy, peak } = pid ? await peakRssDuring(pid, () => download(t.url, t.headers ?? {}, true)) : { result: await download(t.url, t.headers ?? {}, true), peak: 0 };
    if (pid) firstGrowth[name] = peak - idle;
    identical[name] = copy.bytes === CSV_BYTES && copy.sha256 === expected;
  }
  const growth = { gateway: [], floor: [] };
  const samples = await interleaved(csvTargets, async (t, name) => {
    const pid = pidOf[name];
    if (pid === undefined) return download(t.url, t.headers ?? {}, false).then(toMiBs);
    const idle = rss(pid);
    const { result, peak } = await peakRssDuring(pid, () => download(t.url, t.headers ?? {}, false));
    growth[name].push(peak - idle);
    return toMiBs(result);
  });
  function toMiBs(r) {
    if (r.bytes !== CSV_BYTES) throw new Error(`short download: ${r.bytes} of ${CSV_BYTES} bytes`);
    return { mibs: r.bytes / MiB / r.seconds };
  }
  const mibs = med(samples, 'mibs');
  const ratio = mibs.gateway / mibs.floor;
  const scenario = `CSV, ${(CSV_BYTES / MiB).toFixed(0)} MiB`;
  row(scenario, 'MiB/s', mibs.gateway.toFixed(0), refs(mibs, ''), `${ratio.toFixed(2)}× floor${nginx ? `, ${(mibs.gateway / mibs.nginx).toFixed(2)}× nginx` : ''}`, '≥ 0.9× floor', ratio >= 0.9);
  const peakGrowth = Math.max(...growth.gateway);
  const mib = (b) => `${(b / MiB).toFixed(1)} MiB`;
  row(scenario, 'peak RSS over idle, first download in the process', mib(firstGrowth.gateway), `floor ${mib(firstGrowth.floor)}`, 'the floor: dead read buffers wait for V8 to collect; the gateway collects every 4 MiB streamed', '< 32 MiB', firstGrowth.gateway < 32 * MiB);
  row(scenario, 'peak RSS over idle, later downloads (largest)', mib(peakGrowth), `floor ${mib(Math.max(...growth.floor))}`, '', '< 32 MiB', peakGrowth < 32 * MiB);
  row(scenario, 'bytes identical to upstream', identical.gateway ? 'yes' : 'NO', Object.entries(identical).filter(([n]) => n !== 'gateway').map(([n, ok]) => `${n} ${ok ? 'yes' : 'NO'}`).join(', '), '', 'yes', identical.gateway);
}

// ---------------------------------------------------------------------------------------------------
// Floods of unknown keys: Redis commands issued.
/** Sends `count` requests over `concurrency` keep-alive connections; keyFor(i) gives the i-th key. */
async function flood(count, keyFor, concurrency = 50) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses = new Map();
  let next = 0;
  const one = (key) =>
    new Promise((resolve, reject) =>
      http
        .get(`${gateway.url}${LIST}`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
          statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
          res.resume();
          res.once('end', resolve);
        })
        .on('error', reject),
    );
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, async () => { while (next < count) await one(keyFor(next++)); }));
  agent.destroy();
  return { statuses, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}
const unknownKey = (i) => `acquirer_key_unknown${String(i).padStart(36, '0')}`;

if (SCENARIOS.has('flood')) {
  for (const [label, keyFor, target] of [
    [`${FLOOD_REQUESTS} distinct unknown keys`, (i) => unknownKey(i), ''],
    [`${FLOOD_REQUESTS} repetitions of one unknown key`, () => unknownKey(-1 >>> 0), '≤ 10'],
  ]) {
    log(`flood: ${label}`);
    const before = redis.commands();
    const { statuses, seconds } = await flood(FLOOD_REQUESTS, keyFor);
    const after = redis.commands();
    const commands = after.other - before.other;
    const all401 = statuses.size === 1 && statuses.get(401) === FLOOD_REQUESTS;
    if (!all401) throw new Error(`flood: expected only 401, got ${JSON.stringify([...statuses])}`);
    row(`flood, ${label}`, 'Redis commands issued', String(commands), '', `all ${FLOOD_REQUESTS} answered 401, ${(FLOOD_REQUESTS / seconds).toFixed(0)} requests/s (and ${after.pings - before.pings} health-check pings)`, target, target ? commands <= 10 : null);
  }
}

// ---------------------------------------------------------------------------------------------------
// Verdicts in equal time: unknown, disabled, wrong-address and valid keys, first, cached and
// just-expired lookups, medians side by side (bench/verdicts.mjs).
if (SCENARIOS.has('verdicts')) {
  log('verdicts: unknown, disabled, wrong address, valid');
  const medians = await measureVerdicts({ redisUrl: redis.url, upstreamUrl: origin.url, path: LIST });
  for (const [phase, byClass] of Object.entries(medians)) {
    const values = Object.values(byClass);
    const spread = Math.max(...values) / Math.min(...values);
    const shown = Object.entries(byClass).map(([c, us]) => `${c} ${us.toFixed(0)} µs`).join(', ');
    row('verdicts in equal time, one connection', `${phase} lookup, median latency`, shown, '', `slowest ${spread.toFixed(2)}× fastest`, '≤ 1.10×', spread <= 1.1);
  }
}

// ---------------------------------------------------------------------------------------------------
// A key disabled under load: from the moment `keys disable` returns, how long until every request
// with it is refused. Probes on 4 connections record when each request was sent and its status.
if (SCENARIOS.has('disable')) {
  log('disabled key under load');
  const doomed = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_doomed', '--permissions', 'eod_list,eod_read');
  const headers = { authorization: `Bearer ${doomed.key}` };
  const loadS = 6;
  const background = drive({ url: `${gateway.url}${LIST}`, headers, connections: 46, durationS: loadS });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const probes = [];
  let probing = true;
  const probe = () =>
    new Promise((resolve, reject) => {
      const sentAt = performance.now();
      http.get(`${gateway.url}${LIST}`, { agent, headers }, (res) => {
        probes.push({ sentAt, status: res.statusCode });
        res.resume();
        res.once('end', resolve);
      }).on('error', reject);
    });
  const probing4 = Promise.all(Array.from({ length: 4 }, async () => { while (probing) await probe(); }));
  // Under load for a while first, so the key is cached and hot when it is disabled.
  await new Promise((r) => setTimeout(r, 2000));
  const commandAt = performance.now();
  await gatewayCli(gwEnv, 'keys', 'disable', doomed.id);
  const returnedAt = performance.now();
  await new Promise((r) => setTimeout(r, 2000));
  probing = false;
  await probing4;
  await background;
  agent.destroy();
  const allowedAfter = probes.filter((p) => p.sentAt >= commandAt && p.status === 200);
  const lastAllowed = allowedAfter.length ? Math.max(...allowedAfter.map((p) => p.sentAt)) : commandAt;
  const after = probes.filter((p) => p.sentAt > lastAllowed);
  const refusedAfter = after.every((p) => p.status === 401);
  if (!refusedAfter) log('disable: statuses after the last allowed request:', [...new Set(after.map((p) => p.status))].join(', '));
  const lag = lastAllowed - returnedAt;
  row('disabled key under load', 'last request allowed, after `keys disable` returned', lag > 0 ? `${lag.toFixed(1)} ms` : `none (the last was sent ${(-lag).toFixed(1)} ms before)`, '', `the command took ${(returnedAt - commandAt).toFixed(0)} ms; ${after.length} probes after the last allowed one, ${refusedAfter ? 'every one refused (401)' : 'NOT all refused'}`, 'every request refused', refusedAfter && after.length > 0);
}

// ---------------------------------------------------------------------------------------------------
// The soak: one million requests in chunks, RSS and event-loop delay at start and end. A steady load
// (10 connections), not saturation: at 50 connections every turn of the event loop carries a batch
// of requests, and the delay is that batch's time (reported with the JSON list above).
/** `requests` requests of `request` (drive's url, headers, method, bodyFile) in chunks, with the rows they give. */
async function soak(label, requests, request) {
  log(`${label}: ${requests} requests`);
  const pid = gateway.child.pid;
  const rssBefore = rss(pid);
  await loopDelayP99(gateway); // the scrape resets the event-loop delay histogram
  const chunks = [];
  let total = 0;
  while (total < requests) {
    const r = await drive({ ...request, connections: SOAK_CONNECTIONS, durationS: Math.min(SOAK_CHUNK_S, Math.max(1, Math.ceil((requests - total) / 4000))) });
    if (r.failures > 0) throw new Error(`${label}: ${r.failures} failed requests`);
    total += r.requests;
    const metrics = await gateway.metrics();
    chunks.push({ requests: total, rss: rss(pid), heapUsed: metrics.acquirer_gateway_nodejs_heap_size_used_bytes, delayP99: delayOf(metrics), rps: r.rps });
    const c = chunks.at(-1);
    const heapTotal = metrics.acquirer_gateway_nodejs_heap_size_total_bytes;
    log(`  chunk ${chunks.length}: ${c.requests} requests, RSS ${(c.rss / MiB).toFixed(1)} MiB, heap ${(c.heapUsed / MiB).toFixed(1)} used of ${(heapTotal / MiB).toFixed(1)} MiB, loop p99 ${c.delayP99.toFixed(2)} ms`);
  }
  // V8 grows its heap lazily and gives it back after a full collection, so RSS saws up and down by
  // tens of MiB with no leak at all. Retained memory is the saw's floor: the lowest RSS over the first
  // and over the last fifth of the chunks. A leak lifts the floor; the sawing does not.
  const fifth = Math.max(1, Math.floor(chunks.length / 5));
  const startFloor = Math.min(...chunks.slice(0, fifth).map((c) => c.rss));
  const endFloor = Math.min(...chunks.slice(-fifth).map((c) => c.rss));
  const growth = endFloor - startFloor;
  const heapStart = Math.min(...chunks.slice(0, fifth).map((c) => c.heapUsed));
  const heapEnd = Math.min(...chunks.slice(-fifth).map((c) => c.heapUsed));
  const mib = (b) => `${(b / MiB).toFixed(1)} MiB`;
  const scenario = `${label}, ${total} requests, ${SOAK_CONNECTIONS} conn`;
  row(scenario, 'RSS, lowest of the first and of the last fifth of the run', `${mib(startFloor)} → ${mib(endFloor)}`, `idle before ${mib(rssBefore)}; highest ${mib(Math.max(...chunks.map((c) => c.rss)))}`, `${growth >= 0 ? '+' : ''}${mib(growth)} over ${chunks.length} chunks`, '< 20 MiB growth', growth < 20 * MiB);
  row(scenario, 'V8 heap used, lowest of the first and of the last fifth', `${mib(heapStart)} → ${mib(heapEnd)}`, '', 'what the gateway holds; RSS also counts heap V8 has reserved and not yet given back');
  const worst = Math.max(...chunks.map((c) => c.delayP99));
  row(scenario, 'event-loop delay p99', `${chunks[0].delayP99.toFixed(2)} → ${chunks.at(-1).delayP99.toFixed(2)} ms`, '', `first and last chunk; worst chunk ${worst.toFixed(2)} ms; ${median(chunks.map((c) => c.rps)).toFixed(0)} requests/s`, '< 10 ms', worst < 10);
}
if (SCENARIOS.has('soak')) await soak('soak', SOAK_REQUESTS, { url: `${gateway.url}${LIST}`, headers: auth });

// ---------------------------------------------------------------------------------------------------
// Every core: the gateway with WORKERS=2 against WORKERS=1 (the gateway above), 50 connections.
if (SCENARIOS.has('cores')) {
  log('cores: WORKERS=2 against WORKERS=1');
  const gateway2 = await startGateway({ ...gwEnv, WORKERS: '2' });
  // Warmed like the first gateway, which has served every scenario above.
  await drive({ url: `${gateway2.url}${LIST}`, headers: auth, connections: 50, durationS: DURATION_S });
  const samples = await interleaved(
    { one: { url: `${gateway.url}${LIST}`, headers: auth, pid: gateway.child.pid }, two: { url: `${gateway2.url}${LIST}`, headers: auth, pid: gateway2.child.pid } },
    async (t, name) => {
      const before = cpuSeconds(t.pid);
      const r = await drive({ ...t, connections: 50, durationS: DURATION_S });
      if (r.failures > 0) throw new Error(`workers ${name}: ${r.failures} failed requests`);
      const cpu = cpuSeconds(t.pid) - before;
      return { ...r, cores: cpu / DURATION_S, cpuUs: (cpu / r.requests) * 1e6 };
    },
  );
  await gateway2.stop();
  const rps = med(samples, 'rps');
  const cpus = os.availableParallelism();
  const cores = med(samples, 'cores');
  const cpuUs = med(samples, 'cpuUs');
  row('JSON list, 50 conn, WORKERS=2', 'requests/s', rps.two.toFixed(0), `WORKERS=1 ${rps.one.toFixed(0)}`, `${(rps.two / rps.one).toFixed(2)}× one worker; ${cpus} cores shared with the load generator (${Math.round(median(samples.two.map((s) => s.loadCpu)) * 100)}% of a core) and the upstream`, '≥ 1.6× with the load generator on other cores', cpus > 2 ? rps.two / rps.one >= 1.6 : null);
  row('JSON list, 50 conn, WORKERS=2', 'cores used, CPU per request', `${cores.two.toFixed(2)} cores, ${cpuUs.two.toFixed(0)} µs`, `WORKERS=1 ${cores.one.toFixed(2)} cores, ${cpuUs.one.toFixed(0)} µs`, `${(cores.two / cores.one).toFixed(2)}× the cores at ${(cpuUs.two / cpuUs.one).toFixed(2)}× the CPU per request`);
}

// ---------------------------------------------------------------------------------------------------
// A fleet: three gateways (WORKERS=1) through Sentinel under load spread over them, keys disabled
// one after another: requests allowed after a disable returned, the propagation histogram's p99 on
// each instance, and requests/s per instance and per core, for sizing (bench/fleet.mjs).
if (SCENARIOS.has('fleet')) {
  log('fleet: 3 gateways through Sentinel, keys disabled under load');
  const f = await measureFleet({ upstreamUrl: origin.url, path: LIST, loadS: FLEET_SECONDS, disables: FLEET_DISABLES, pids: { upstream: origin.child.pid } });
  const scenario = `fleet, 3 gateways (WORKERS=1) through Sentinel, 3×${f.connections} conn`;
  const total = f.perInstance.reduce((s, i) => s + i.rps, 0);
  const gatewayCores = f.perInstance.reduce((s, i) => s + i.cores, 0);
  const cpus = os.availableParallelism();
  const shown = (xs, fmt) => xs.map((x, i) => `${'abc'[i]} ${fmt(x)}`).join(', ');
  for (const [i, p] of f.perInstance.entries()) log(`  instance ${'abc'[i]}: ${p.rps.toFixed(0)} requests/s (wrk ${p.wrkRps.toFixed(0)}, probes ${p.probeRps.toFixed(0)}), ${p.cores.toFixed(2)} cores, wrk ${Math.round(p.wrkCores * 100)}% of a core, ${p.wrkFailures} wrk failures; propagation ${f.propagation[i].count} observed, buckets ${f.propagation[i].buckets.map(([le, n]) => `${le}:${n}`).join(' ')}`);
  log(`  disables took ${f.disables.map((ms) => ms.toFixed(0)).join(', ')} ms; last allowed request per key, from its return: ${f.lastAllowed.map((ms) => ms.toFixed(1)).join(', ')} ms`);
  for (const v of f.violations) log(`  NOT REFUSED: instance ${'abc'[v.instance]}, key ${v.key}, status ${v.status}, sent ${v.msAfterReturn.toFixed(1)} ms after its disable returned`);
  const failures = f.perInstance.reduce((s, i) => s + i.wrkFailures, 0);
  row(scenario, 'requests/s, in total and per instance', total.toFixed(0), shown(f.perInstance, (p) => p.rps.toFixed(0)), `over ${f.windowS.toFixed(1)} s: a valid key by wrk (${f.connections - f.probeConnections} conn per instance, ${failures} failures) and the keys to disable by ${f.probeConnections} probe connections per instance`);
  const used = { gateways: gatewayCores, wrk: f.perInstance.reduce((s, i) => s + i.wrkCores, 0), ...f.otherCores };
  const rest = f.machineCores - Object.values(used).reduce((s, c) => s + c, 0);
  const where = Object.entries(used).map(([n, c]) => `${n} ${c.toFixed(2)}`).join(', ');
  row(scenario, 'requests/s per core', `${(total / gatewayCores).toFixed(0)} per core of gateway CPU`, `${(total / cpus).toFixed(0)} per core of the machine`, `${cpus} shared cores, ${f.machineCores.toFixed(2)} busy: ${where}, and ${rest.toFixed(2)} not this run's (the kernel's network work, other processes, time taken by the host)`);
  const refused = f.violations.length === 0 && f.probesAfter > 0 && f.notAllowedBefore === 0 && f.lastAllowed.every((ms) => ms > -Infinity);
  const lastAllowed = Math.max(...f.lastAllowed);
  row(scenario, 'requests not refused after `keys disable` returned', String(f.violations.length), `${f.probesAfter} probe requests after the returns`, `${f.disables.length} keys disabled, each command ${Math.min(...f.disables).toFixed(0)}–${Math.max(...f.disables).toFixed(0)} ms; the last allowed request ${lastAllowed > 0 ? `${lastAllowed.toFixed(1)} ms after` : `${(-lastAllowed).toFixed(1)} ms before`} its return${f.notAllowedBefore ? `; ${f.notAllowedBefore} requests before a disable NOT answered 200` : ''}`, '0', refused);
  const p99s = f.propagation.map((p) => p.p99 * 1000);
  row(scenario, 'key change propagation p99 (histogram buckets)', `${Math.max(...p99s).toFixed(1)} ms (highest)`, shown(p99s, (ms) => `${ms.toFixed(1)} ms`), `${f.propagation.map((p) => p.count).join(', ')} notices observed; interpolated within buckets of 1, 5, 10, 25 ms…`, '≤ 1 s (the alert)', Math.max(...p99s) <= 1000);
}

// ---------------------------------------------------------------------------------------------------
// Rate limits per key (bench/limits.mjs). Cost: the list at 50 connections through gateways of
// their own, with no rate_limits (twice: the spread of two processes of one build) and with a default
// limit far above the load, on the local store and on the Redis store. Accuracy: three gateways,
// one key, a limit of 100 per second, load well above it spread over the three: allowed per second.
if (SCENARIOS.has('limits')) {
  log('rate limits: cost, the list at 50 connections, no limit against a limit far above the load');
  const c = await measureLimitsCost({ gwEnv, auth, path: LIST, interleaved, driveMeasuringCpu, warmupS: WARMUP_S, durationS: DURATION_S, log });
  const scenario = 'rate limits, JSON list, 50 conn, default limit 1,000,000/s (never reached)';
  const B = 'no limit B';
  // Two processes of one build differ round by round within this band (1 included): no limit B's
  // ratios to the no-limit gateway, its highest and lowest round left out from 5 rounds up (on this
  // VM one round in five can halve a process's requests/s). A store whose paired ratio falls inside
  // it cannot be told from the no-limit gateway in this run.
  const band = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const kept = s.length >= 5 ? s.slice(1, -1) : s;
    return [Math.min(1, kept[0]), Math.max(1, kept.at(-1))];
  };
  const [bandRps, bandCpu] = [band(c.sameBuildRounds.rps), band(c.sameBuildRounds.cpuUs)];
  const judged = (x, [lo, hi]) => `${x >= lo && x <= hi ? 'within' : 'outside'} the band of two no-limit processes, ${lo.toFixed(2)}–${hi.toFixed(2)}× (no limit B's middle rounds)`;
  const refsRps = `no limit ${c.rps['no limit'].toFixed(0)}, no limit B ${c.rps[B].toFixed(0)}`;
  const refsCpu = `no limit ${c.cpuUs['no limit'].toFixed(0)} µs, no limit B ${c.cpuUs[B].toFixed(0)} µs`;
  for (const store of ['local', 'redis']) {
    row(scenario, `requests/s, ${store} store`, c.rps[store].toFixed(0), refsRps, `${(c.rps[store] / c.rps['no limit']).toFixed(2)}× no limit, paired ${c.rpsPaired[store].toFixed(2)}×: ${judged(c.rpsPaired[store], bandRps)}; no limit B paired ${c.rpsPaired[B].toFixed(2)}×; the no-limit gateway's own rounds spread over ${(c.roundSpread * 100).toFixed(0)}% of their median`);
    row(scenario, `CPU per request, ${store} store`, `${c.cpuUs[store].toFixed(0)} µs`, refsCpu, `${(c.cpuUs[store] / c.cpuUs['no limit']).toFixed(2)}× no limit, paired ${c.cpuPaired[store].toFixed(2)}×: ${judged(c.cpuPaired[store], bandCpu)}; no limit B paired ${c.cpuPaired[B].toFixed(2)}×; main thread ${c.mainUs[store].toFixed(0)} µs against ${c.mainUs['no limit'].toFixed(0)} and ${c.mainUs[B].toFixed(0)}`);
  }
  const breakdown = (n) => Object.entries(c.commands[n].total).sort((a, b) => b[1] - a[1]).map(([cmd, k]) => `${cmd} ${k}`).join(', ') || 'none';
  // INFO commandstats counts the commands a Lua script calls as well as the script's own call: the
  // gateway's round trips are the script calls, the rest of the count is what each script ran.
  const scriptCalls = (n) => ['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro'].reduce((sum, cmd) => sum + (c.commands[n].total[cmd] ?? 0), 0);
  row(
    scenario,
    'Redis commands per request, redis store',
    `${(scriptCalls('redis') / c.commands.redis.requests).toFixed(3)} script calls; ${c.commands.redis.perRequest.toFixed(3)} commands counted`,
    `local store ${c.commands.local.perRequest.toFixed(6)}, no limit ${c.commands['no limit'].perRequest.toFixed(6)} commands counted`,
    `${c.commands.redis.all} commands counted in ${c.commands.redis.requests} requests (${breakdown('redis')}): INFO commandstats counts the commands a script calls beside the script's own call. During the local store's rounds: ${breakdown('local')}. Every gateway of this scenario shares the Redis, so each count holds the others' background work too (announcements, the key's TTL refresh)`,
  );
  row(scenario, "Redis's CPU per request", `redis store ${c.redisCpuUs.redis.toFixed(1)} µs`, `local store ${c.redisCpuUs.local.toFixed(1)} µs, no limit ${c.redisCpuUs['no limit'].toFixed(1)} µs`, 'redis-server over the same rounds, on the same two cores');
  row(scenario, 'load generator', loadGenerator, '', `load generator CPU ${Math.round(c.loadCpu * 100)}% of a core`);

  for (const store of ['local', 'redis']) {
    log(`rate limits: accuracy, 3 gateways, ${store} store, one key at 100 per second (burst 10)`);
    const a = await measureLimitsAccuracy({ redisUrl: redis.url, upstreamUrl: origin.url, path: LIST, route: 'eod_statements_list', store, seconds: LIMITS_SECONDS, connections: LIMITS_CONNECTIONS, log });
    const errorsShown = (e) => Object.entries(e).map(([context, n]) => `${context} ${n}`).join(', ');
    for (const [i, p] of a.perInstance.entries()) log(`  instance ${'abc'[i]}: ${p.allowed} allowed, ${p.refused} refused (counted by rate_limited_total ${p.rateLimited}, by denials_total ${p.denied}), ${p.others} other; store errors: ${errorsShown(p.storeErrors)}; event-loop delay max ${p.loopDelayMaxMs.toFixed(0)} ms; wrk ${p.wrkRps.toFixed(0)} requests/s`);
    const ok = Math.abs(a.allowedPerS - 100) <= 10;
    const storeErrors = Object.values(a.storeErrors).reduce((n, k) => n + k, 0);
    row(
      `rate limits, 3 gateways (WORKERS=1), one key, 100/s burst 10, ${store} store, 3×${a.connections} conn`,
      'allowed per second, the fleet',
      a.allowedPerS.toFixed(1),
      a.perInstance.map((p, i) => `${'abc'[i]} ${(p.allowed / a.windowS).toFixed(1)}`).join(', '),
      `${a.allowed} answered 200 and ${a.refused} 429${a.others ? ` (and ${a.others} other statuses)` : ''} in ${a.windowS.toFixed(2)} s (refusals counted by acquirer_gateway_rate_limited_total: ${a.rateLimited}${a.rateLimited === a.refused ? '' : ', NOT the 429s'}; by denials_total{reason="rate_limited"}: ${a.denied}${a.denied === a.refused ? '' : ', NOT the 429s'}), ${a.offeredPerS.toFixed(0)} requests/s offered; Redis calls not answered in time (acquirer_gateway_rate_limit_store_errors_total): ${storeErrors ? errorsShown(a.storeErrors) : 'none'}; event-loop delay max ${a.perInstance.map((p) => p.loopDelayMaxMs.toFixed(0)).join(', ')} ms; ${store === 'local' ? `every instance counted 3 after ${a.countedAfterS.toFixed(1)} s of its start, and ${a.countedAfter.join(', ')} at the window's end` : `instances gauge at the window's end: ${a.countedAfter.map((n) => (Number.isNaN(n) ? 'absent' : n)).join(', ')} (the Redis store counts none)`}`,
      '100 ± 10%',
      ok,
    );
  }
}

await gateway.stop();
stopAll();
rmSync(WRITE_BODY_FILE, { force: true });

const verdict = (met) => (met === null ? '' : met ? 'met' : '**not met**');
const table = [
  '| scenario | figure | gateway | references | comparison | target | |',
  '|---|---|---|---|---|---|---|',
  ...rows.map((r) => `| ${r.scenario} | ${r.figure} | ${r.gateway} | ${r.reference} | ${r.comparison} | ${r.target} | ${verdict(r.met)} |`),
];
const versions = `node ${process.version}; ${loadGenerator}${nginx ? `; nginx ${nginx.version}` : '; no nginx'}; ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown'})`;
process.stdout.write(`\n${table.join('\n')}\n\nrounds ${ROUNDS} × ${DURATION_S} s, interleaved; ${versions}\n`);
process.exit(0);
