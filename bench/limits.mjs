// Rate limits per API key: what the check costs, and how close a fleet holds the limit.
// Cost: the JSON list at 50 connections through a gateway with no rate_limits, a second such process
// (the spread of two processes of one build), and gateways whose default limit is far above the load
// with the local store and with the Redis store, rounds interleaved; requests/s, CPU per request of
// each (and of Redis), and Redis commands per request.
// Accuracy: three gateways (WORKERS=1) on one Redis with a default limit of 100 per second (burst 10),
// one key, load spread evenly over the three well above the limit; once every instance counts three
// live instances, the requests each answered 200 and 429 over BENCH_LIMITS_SECONDS, from each one's
// acquirer_gateway_requests_total. For the local store and for the Redis store.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { drive } from './lib/load.mjs';
import { cpuSeconds, gatewayCli, get, mainThreadCpuSeconds, startGateway } from './lib/services.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const SHIPPED_POLICY = path.join(here, '..', 'policies', 'acquirer-api.yaml');
const INSTANCES = 3;
const INSTANCES_GAUGE = 'acquirer_gateway_rate_limit_instances';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** The shipped policy with a top-level `rate_limits.default`, written into `dir`; its path. */
export function policyWithDefaultLimit(dir, { perSecond, burst }) {
  const file = path.join(dir, `policy-${perSecond}-${burst}.yaml`);
  const limits = `\n# Added by bench/limits.mjs: one budget per API key for every route.\nrate_limits:\n  default: { per_second: ${perSecond}, burst: ${burst} }\n`;
  writeFileSync(file, readFileSync(SHIPPED_POLICY, 'utf8') + limits);
  return file;
}

/** `redis-cli` against the Redis at `url` (redis://host:port), its stdout. */
const redisCli = (url, ...args) => {
  const { hostname, port } = new URL(url);
  return spawnSync('redis-cli', ['-h', hostname, '-p', port, ...args]).stdout.toString();
};
/** Calls so far per command (INFO commandstats), leaving out INFO itself (this probe's) and PING (health checks). */
function commandCalls(url) {
  const calls = {};
  for (const m of redisCli(url, 'info', 'commandstats').matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (m[1] !== 'info' && m[1] !== 'ping') calls[m[1]] = Number(m[2]);
  return calls;
}
const callsBetween = (before, after) => Object.fromEntries(Object.entries(after).map(([c, n]) => [c, n - (before[c] ?? 0)]).filter(([, n]) => n > 0));
const redisPid = (url) => Number(/^process_id:(\d+)/m.exec(redisCli(url, 'info', 'server'))?.[1]);

/** Each series of a counter on a /metrics text, as [{ labels, value }]. */
function series(text, name) {
  const out = [];
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? ([0-9.eE+-]+)$`, 'gm'))) {
    const labels = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    out.push({ labels, value: Number(m[2]) });
  }
  return out;
}
/**
 * From a gateway's admin /metrics: requests answered so far on `route` by status, the refusals its
 * own counter holds for that route, and the rate limit calls Redis did not answer (every context).
 */
async function answeredByStatus(gateway, route) {
  const { body } = await get(`${gateway.adminUrl}/metrics`);
  const byStatus = {};
  for (const s of series(body, 'acquirer_gateway_requests_total')) if (s.labels.route === route) byStatus[s.labels.status] = (byStatus[s.labels.status] ?? 0) + s.value;
  const total = (name, keep = () => true) => series(body, name).filter(keep).reduce((sum, s) => sum + s.value, 0);
  const errors = (context) => total('acquirer_gateway_rate_limit_store_errors_total', (s) => s.labels.context === context);
  return {
    byStatus,
    rateLimited: total('acquirer_gateway_rate_limited_total', (s) => s.labels.route === route),
    // Every route's, but only this one is loaded.
    denied: total('acquirer_gateway_denials_total', (s) => s.labels.reason === 'rate_limited'),
    storeErrors: { 'rate limit': errors('rate limit'), 'instance count': errors('instance count') },
    // prom-client's event-loop delay histogram starts again at each scrape: this is since the last one.
    loopDelayMaxMs: (series(body, 'acquirer_gateway_nodejs_eventloop_lag_max_seconds')[0]?.value ?? NaN) * 1000,
  };
}
/** The instances a gateway counts now (NaN while the gauge is missing). */
async function instancesCounted(gateway) {
  const { body } = await get(`${gateway.adminUrl}/metrics`);
  return series(body, INSTANCES_GAUGE)[0]?.value ?? NaN;
}

/**
 * The cost. `interleaved(targets, measure)` and `driveMeasuringCpu(target, options)` are run.mjs's.
 * Starts four gateways of its own on the run's Redis (`gwEnv`), with the run's key (`auth`), warms
 * each up for `warmupS`, then the interleaved rounds at 50 connections. Every gateway it starts is
 * stopped before it returns or throws.
 */
export async function measureLimitsCost({ gwEnv, auth, path: target, interleaved, driveMeasuringCpu, warmupS, durationS, log }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-limits-'));
  const gateways = [];
  try {
    const far = policyWithDefaultLimit(dir, { perSecond: 1_000_000, burst: 1_000_000 });
    const variants = {
      'no limit': {},
      'no limit B': {},
      local: { POLICY_FILE: far, RATE_LIMIT_STORE: 'local' },
      redis: { POLICY_FILE: far, RATE_LIMIT_STORE: 'redis' },
    };
    const targets = {};
    for (const [name, env] of Object.entries(variants)) {
      const g = await startGateway({ ...gwEnv, ...env });
      gateways.push(g);
      const { status, body } = await get(`${g.url}${target}`, auth);
      if (status !== 200) throw new Error(`limits: the ${name} gateway answers ${status} to the bench key: ${body.slice(0, 200)}`);
      targets[name] = { url: `${g.url}${target}`, headers: auth, pid: g.child.pid };
    }
    log(`rate limit cost: warm-up, ${warmupS} s per gateway`);
    for (const t of Object.values(targets)) await drive({ ...t, connections: 50, durationS: warmupS });
    const rPid = redisPid(gwEnv.REDIS_URL);
    const samples = await interleaved(targets, async (t, name) => {
      const calls = commandCalls(gwEnv.REDIS_URL);
      const redisCpu = cpuSeconds(rPid);
      const main = mainThreadCpuSeconds(t.pid);
      const r = await driveMeasuringCpu(t, { connections: 50, durationS });
      if (r.failures > 0) throw new Error(`limits ${name}: ${r.failures} failed requests (a limit of 1,000,000 per second should refuse none)`);
      const perRequestUs = (seconds) => (seconds / r.requests) * 1e6;
      return { ...r, mainUs: perRequestUs(mainThreadCpuSeconds(t.pid) - main), calls: callsBetween(calls, commandCalls(gwEnv.REDIS_URL)), redisCpuUs: perRequestUs(cpuSeconds(rPid) - redisCpu) };
    });
    const names = Object.keys(targets);
    const med = (field) => Object.fromEntries(names.map((n) => [n, median(samples[n].map((s) => s[field]))]));
    /** The median over rounds of each round's figure over the no-limit gateway's in the same round. */
    const ratios = (n, field) => samples[n].map((s, i) => s[field] / samples['no limit'][i][field]);
    const paired = (field) => Object.fromEntries(names.map((n) => [n, median(ratios(n, field))]));
    const commands = Object.fromEntries(
      names.map((n) => {
        const total = {};
        for (const s of samples[n]) for (const [c, k] of Object.entries(s.calls)) total[c] = (total[c] ?? 0) + k;
        const requests = samples[n].reduce((sum, s) => sum + s.requests, 0);
        const all = Object.values(total).reduce((sum, k) => sum + k, 0);
        return [n, { total, all, requests, perRequest: all / requests }];
      }),
    );
    const rounds = samples['no limit'].map((s) => s.rps);
    return {
      rps: med('rps'),
      cpuUs: med('cpuUs'),
      mainUs: med('mainUs'),
      redisCpuUs: med('redisCpuUs'),
      rpsPaired: paired('rps'),
      cpuPaired: paired('cpuUs'),
      /** Each round's ratio of the second no-limit process to the first: what two processes of one build differ by. */
      sameBuildRounds: { rps: ratios('no limit B', 'rps'), cpuUs: ratios('no limit B', 'cpuUs') },
      commands,
      /** The no-limit gateway's own rounds: (highest − lowest) over their median. */
      roundSpread: (Math.max(...rounds) - Math.min(...rounds)) / median(rounds),
      loadCpu: median(samples.redis.map((s) => s.loadCpu)),
    };
  } finally {
    await Promise.all(gateways.map((g) => g.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The accuracy, for one store. Three gateways (WORKERS=1) on the Redis at `redisUrl` with keys of
 * their own (REDIS_KEY_PREFIX per store), a default limit of `perSecond` (burst `burst`), one key,
 * wrk on `connections` connections per gateway. With the local store, waits (up to `countedWithinS`)
 * until every instance counts three. Then loads all three for `settleS` unmeasured (the burst spent, each one's share steady),
 * then counts `seconds` of answers. Every gateway it starts is stopped before it returns or throws.
 */
export async function measureLimitsAccuracy({ redisUrl, upstreamUrl, path: target, route, store, seconds, connections = 4, perSecond = 100, burst = 10, settleS = 2, countedWithinS = 30, log }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-limits-'));
  const gateways = [];
  let loads = [];
  try {
    const policy = policyWithDefaultLimit(dir, { perSecond, burst });
    const env = { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `bench-limits-${store}:`, UPSTREAM_URL: upstreamUrl };
    const key = await gatewayCli(env, 'keys', 'create', '--acquirer', 'acq_limits', '--permissions', 'eod_list,eod_read');
    const auth = { authorization: `Bearer ${key.key}` };
    for (let i = 0; i < INSTANCES; i++) gateways.push(await startGateway({ ...env, POLICY_FILE: policy, RATE_LIMIT_STORE: store, WORKERS: '1' }));
    const startedAt = performance.now();
    for (const g of gateways) {
      const { status } = await get(`${g.url}${target}`, auth);
      if (status !== 200) throw new Error(`limits: ${g.url} answers ${status} to a fresh key`);
    }
    // With the local store every instance must count the fleet before the window opens: until then
    // each one enforces a larger share than a third. The Redis store holds one budget for the fleet
    // and counts no instances (its gauge is read for the record).
    let countedAfterS = NaN;
    if (store === 'local') {
      const deadline = startedAt + countedWithinS * 1000;
      for (;;) {
        const counted = await Promise.all(gateways.map(instancesCounted));
        if (counted.every((n) => n === INSTANCES)) break;
        if (performance.now() > deadline) throw new Error(`limits (${store}): after ${countedWithinS} s the instances count ${counted.join(', ')}, not ${INSTANCES} each (${INSTANCES_GAUGE})`);
        await sleep(100);
      }
      countedAfterS = (performance.now() - startedAt) / 1000;
      log(`  ${store}: every instance counted ${INSTANCES} after ${countedAfterS.toFixed(1)} s`);
    }

    // wrk's run outlasts the window by a second on each side.
    // Each failure held until the window is over (else an early one is an unhandled rejection).
    loads = gateways.map((g) => drive({ url: `${g.url}${target}`, headers: auth, connections, durationS: settleS + seconds + 2 }).catch((error) => ({ error })));
    await sleep(settleS * 1000);
    const snapshot = async () => {
      const at = performance.now();
      const counts = await Promise.all(gateways.map((g) => answeredByStatus(g, route)));
      return { at: (at + performance.now()) / 2, counts };
    };
    const before = await snapshot();
    await sleep(seconds * 1000);
    const after = await snapshot();
    const countedAfter = await Promise.all(gateways.map(instancesCounted));
    const wrk = await Promise.all(loads);
    loads = [];
    const failed = wrk.find((w) => w.error !== undefined);
    if (failed) {
      // Whether a gateway went away, or was there and did not accept.
      const states = gateways.map((g, i) => `${'abc'[i]} ${g.child.exitCode === null && g.child.signalCode === null ? 'running' : `exited (${g.child.exitCode ?? g.child.signalCode})`}`);
      throw new Error(`limits (${store}): ${failed.error.message}; gateways now: ${states.join(', ')}`);
    }
    const windowS = (after.at - before.at) / 1000;
    const perInstance = gateways.map((_, i) => {
      const [b, a] = [before.counts[i], after.counts[i]];
      const delta = (status) => (a.byStatus[status] ?? 0) - (b.byStatus[status] ?? 0);
      const others = Object.keys(a.byStatus).filter((s) => s !== '200' && s !== '429').reduce((sum, s) => sum + delta(s), 0);
      const storeErrors = Object.fromEntries(Object.keys(a.storeErrors).map((c) => [c, a.storeErrors[c] - b.storeErrors[c]]));
      return { allowed: delta('200'), refused: delta('429'), others, rateLimited: a.rateLimited - b.rateLimited, denied: a.denied - b.denied, storeErrors, loopDelayMaxMs: a.loopDelayMaxMs, wrkRps: wrk[i].rps };
    });
    const sum = (field) => perInstance.reduce((s, p) => s + p[field], 0);
    return {
      store,
      windowS,
      countedAfterS,
      countedAfter,
      perInstance,
      allowed: sum('allowed'),
      refused: sum('refused'),
      others: sum('others'),
      rateLimited: sum('rateLimited'),
      denied: sum('denied'),
      storeErrors: Object.fromEntries(Object.keys(perInstance[0].storeErrors).map((c) => [c, perInstance.reduce((n, p) => n + p.storeErrors[c], 0)])),
      allowedPerS: sum('allowed') / windowS,
      offeredPerS: (sum('allowed') + sum('refused') + sum('others')) / windowS,
      connections,
    };
  } finally {
    await Promise.allSettled(loads);
    await Promise.all(gateways.map((g) => g.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
}
