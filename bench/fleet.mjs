// A fleet: three gateways (WORKERS=1 each) on one Redis through Sentinel (a primary, a replica and
// three Sentinels, bench/lib/sentinel.mjs), under load spread over the three, while keys are disabled
// one after another. Per instance, wrk drives a valid key, and probe loops on keep-alive connections
// of this process drive the keys to be disabled, each request timestamped when it is sent.
// Figures: every probe request sent after its key's `keys disable` returned must be refused (401);
// the key change propagation histogram's p99 on each instance; requests/s per instance, in total
// and per core of the gateways' CPU, for sizing.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { drive } from './lib/load.mjs';
import { startSentinelTopology } from './lib/sentinel.mjs';
import { cpuSeconds, gatewayCli, get, startGateway } from './lib/services.mjs';

const INSTANCES = 3;
const PROPAGATION = 'acquirer_gateway_key_change_propagation_seconds';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A histogram's cumulative buckets from a /metrics text: [[le, count], …] in order, +Inf last. */
export function histogramBuckets(text, name) {
  const buckets = [];
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{(?:[^}]*,)?le="([^"]+)"[^}]*\\} ([0-9.eE+-]+)$`, 'gm'))) {
    buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return buckets.sort((a, b) => a[0] - b[0]);
}

/**
 * The q-quantile of a cumulative histogram as Prometheus's histogram_quantile estimates it: the
 * bucket the rank falls in, linearly interpolated between its bounds (0 below the first), or the
 * highest finite bound when it falls in +Inf. NaN with no observation.
 */
export function histogramQuantile(q, buckets) {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) return le === Infinity ? lower : lower + ((le - lower) * (rank - below)) / (count - below);
    lower = le;
    below = count;
  }
  return lower;
}

/**
 * `connections` keep-alive probe loops per instance, each sending the keys in turn and recording the
 * instance, the key, the send time (performance.now(), taken just before the request is written) and
 * the status. A loop waits for its answer before it sends again, so no request waits in the agent.
 */
function startProbes(gateways, target, keys, connections) {
  const records = [];
  let running = true;
  const agents = gateways.map(() => new http.Agent({ keepAlive: true, maxSockets: connections }));
  const one = (instance, key) =>
    new Promise((resolve) => {
      http
        .get(`${gateways[instance].url}${target}`, { agent: agents[instance], headers: { authorization: `Bearer ${keys[key].key}` } }, (res) => {
          res.resume();
          res.once('end', () => resolve(res.statusCode));
          res.once('error', () => resolve('error'));
        })
        .on('error', () => resolve('error'));
    });
  const loops = gateways.flatMap((_, instance) =>
    Array.from({ length: connections }, async (_, loop) => {
      for (let n = loop; running; n++) {
        const key = n % keys.length;
        const sentAt = performance.now();
        const status = await one(instance, key);
        records.push({ instance, key, sentAt, status });
        if (status === 'error') await sleep(10);
      }
    }),
  );
  return {
    records,
    async stop() {
      running = false;
      await Promise.all(loops);
      for (const agent of agents) agent.destroy();
    },
  };
}

/** CPU seconds of a process, or of several summed. */
const cpuOf = (pids) => [pids].flat().reduce((sum, pid) => sum + cpuSeconds(pid), 0);

/** CPU seconds the whole machine has been busy (every process, the kernel, and time stolen by the host), from /proc/stat. */
function machineBusySeconds() {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  return (user + nice + system + irq + softirq + steal) / 100; // USER_HZ
}

/** CPU seconds of this process's children that have exited and been waited for (the keys commands, wrk's shells), from /proc. */
function reapedChildrenSeconds() {
  const fields = readFileSync('/proc/self/stat', 'utf8').replace(/^.*\) /s, '').split(' ');
  return (Number(fields[13]) + Number(fields[14])) / 100; // cutime, cstime
}

/** Each instance's propagation histogram: observations and p99 in seconds (from the buckets). */
async function propagation(gateways) {
  return Promise.all(
    gateways.map(async (g) => {
      const { body } = await get(`${g.adminUrl}/metrics`);
      const buckets = histogramBuckets(body, PROPAGATION);
      if (buckets.length === 0) throw new Error(`fleet: ${g.adminUrl}/metrics has no ${PROPAGATION}`);
      return { count: buckets.at(-1)[1], p99: histogramQuantile(0.99, buckets), buckets };
    }),
  );
}

/**
 * The scenario. `connections` per instance, `probeConnections` of them the probes (the rest wrk's);
 * `disables` keys disabled one after another, `gapMs` apart, from 2 s into `loadS` seconds of load,
 * after `warmUpS` seconds of the same load unmeasured. `pids` are other processes whose CPU is shown
 * (the upstream). Every process it starts is stopped before it returns or throws.
 */
export async function measureFleet({ upstreamUrl, path: target, connections = 16, probeConnections = 4, disables = 5, gapMs = 1000, warmUpS = 3, loadS = 15, pids = {} }) {
  if (!(disables >= 1)) throw new Error('fleet: at least one key to disable');
  const topology = await startSentinelTopology();
  const gateways = [];
  let probes;
  let loads = [];
  try {
    const keysEnv = { REDIS_SENTINELS: topology.sentinels, REDIS_SENTINEL_NAME: topology.name, REDIS_KEY_PREFIX: 'bench-fleet:', UPSTREAM_URL: upstreamUrl };
    for (let i = 0; i < INSTANCES; i++) gateways.push(await startGateway({ ...keysEnv, WORKERS: '1' }));
    const valid = await gatewayCli(keysEnv, 'keys', 'create', '--acquirer', 'acq_fleet', '--permissions', 'eod_list,eod_read');
    const doomed = [];
    for (let i = 0; i < disables; i++) doomed.push(await gatewayCli(keysEnv, 'keys', 'create', '--acquirer', 'acq_fleet_doomed', '--permissions', 'eod_list,eod_read'));
    for (const g of gateways) {
      for (const k of [valid, ...doomed]) {
        const { status } = await get(`${g.url}${target}`, { authorization: `Bearer ${k.key}` });
        if (status !== 200) throw new Error(`fleet: ${g.url} answers ${status} to a fresh key`);
      }
    }
    const auth = { authorization: `Bearer ${valid.key}` };
    const wrkConnections = connections - probeConnections;
    const loadAll = (durationS) => gateways.map((g) => drive({ url: `${g.url}${target}`, headers: auth, connections: wrkConnections, durationS }));

    probes = startProbes(gateways, target, doomed, probeConnections);
    loads = loadAll(warmUpS);
    await Promise.all(loads);

    const cpuBefore = gateways.map((g) => cpuSeconds(g.child.pid));
    const otherPids = { ...pids, redis: topology.pids };
    const otherBefore = Object.fromEntries(Object.entries(otherPids).map(([n, pid]) => [n, cpuOf(pid)]));
    const selfBefore = process.cpuUsage();
    const machineBefore = machineBusySeconds();
    const reapedBefore = reapedChildrenSeconds();
    const startedAt = performance.now();
    // The window ends when wrk does: CPU and the probes are counted over the same seconds.
    const measured = Promise.all(loadAll(loadS)).then((wrk) => {
      const endedAt = performance.now();
      const windowS = (endedAt - startedAt) / 1000;
      const self = process.cpuUsage(selfBefore);
      // wrk reports its own CPU; what else of the children's is the keys commands'.
      const keysCommands = reapedChildrenSeconds() - reapedBefore - wrk.reduce((sum, w) => sum + w.cpuSeconds, 0);
      const cores = {
        ...Object.fromEntries(Object.entries(otherPids).map(([n, pid]) => [n, (cpuOf(pid) - otherBefore[n]) / windowS])),
        'probes (this process)': (self.user + self.system) / 1e6 / windowS,
        'keys commands': keysCommands / windowS,
      };
      return { wrk, endedAt, windowS, cores, gatewayCpu: gateways.map((g, i) => cpuSeconds(g.child.pid) - cpuBefore[i]), machineCores: (machineBusySeconds() - machineBefore) / windowS };
    });
    loads = [measured];
    const changes = [];
    await sleep(2000);
    for (const [key, k] of doomed.entries()) {
      const commandAt = performance.now();
      await gatewayCli(keysEnv, 'keys', 'disable', k.id);
      changes.push({ key, commandAt, returnedAt: performance.now() });
      await sleep(gapMs);
    }
    const { wrk, endedAt, windowS, cores, gatewayCpu, machineCores } = await measured;
    loads = [];
    if (changes.at(-1).returnedAt > endedAt) throw new Error(`fleet: the disables ran past the ${loadS} s of load; give it more (BENCH_FLEET_SECONDS)`);
    await sleep(500);
    await probes.stop();
    const records = probes.records;
    probes = undefined;

    // Every probe request sent after its key's disable returned, and those of them not refused.
    const after = records.filter((r) => r.sentAt >= changes[r.key].returnedAt);
    const violations = after.filter((r) => r.status !== 401).map((r) => ({ instance: r.instance, key: r.key, status: r.status, msAfterReturn: r.sentAt - changes[r.key].returnedAt }));
    // The last request with each key answered 200, from the command's return (negative: before it).
    const lastAllowed = changes.map((c) => {
      const allowed = records.filter((r) => r.key === c.key && r.status === 200).map((r) => r.sentAt);
      return allowed.length ? Math.max(...allowed) - c.returnedAt : -Infinity;
    });
    // Requests sent before a key's disable began that were not answered 200 (there should be none).
    const notAllowedBefore = records.filter((r) => r.sentAt < changes[r.key].commandAt && r.status !== 200).length;

    const inWindow = (r) => r.sentAt >= startedAt && r.sentAt < endedAt;
    const perInstance = gateways.map((_, i) => {
      const probed = records.filter((r) => r.instance === i && inWindow(r)).length;
      return { rps: wrk[i].rps + probed / windowS, wrkRps: wrk[i].rps, probeRps: probed / windowS, cores: gatewayCpu[i] / windowS, wrkFailures: wrk[i].failures, wrkCores: wrk[i].loadCpu };
    });
    return {
      windowS,
      connections,
      probeConnections,
      perInstance,
      propagation: await propagation(gateways),
      disables: changes.map((c) => c.returnedAt - c.commandAt),
      probesAfter: after.length,
      violations,
      lastAllowed,
      notAllowedBefore,
      machineCores,
      otherCores: cores,
    };
  } finally {
    await probes?.stop();
    await Promise.allSettled(loads); // wrk ends on its own after its duration
    await Promise.all(gateways.map((g) => g.stop()));
    await topology.stop();
  }
}
