// Verdicts in equal time (docs/security.md): the latency a client sees for unknown, disabled,
// wrong-address and valid keys, on a first, a cached and a just-expired lookup, through a gateway of
// its own with a short KEY_CACHE_TTL_MS. Requests go one at a time on one keep-alive connection,
// every class interleaved in a shuffled order; the figure is each class's median.
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { startGateway } from './lib/services.mjs';

const TTL_MS = 5000;
const ROOT = path.join(path.dirname(new URL(import.meta.url).pathname), '..');
const CLASSES = ['unknown', 'disabled', 'wrong address', 'valid'];
const PHASES = ['first', 'cached', 'just expired'];

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const shuffled = (xs) => {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
};

/**
 * `keysPerClass` keys of each class, written straight into Redis (the CLI would take a process per
 * key). The valid key lacks the list's permission, so its answer, 403, comes from the gateway too.
 */
async function makeKeys(redisUrl, prefix, keysPerClass) {
  const { RedisKeyStore } = await import(pathToFileURL(path.join(ROOT, 'dist/keys/redis-key-store.js')).href);
  const { urlTarget } = await import(pathToFileURL(path.join(ROOT, 'dist/keys/redis-target.js')).href);
  const { generateKey, generateKeyId, hashKey } = await import(pathToFileURL(path.join(ROOT, 'dist/keys/api-key.js')).href);
  const store = new RedisKeyStore({ target: urlTarget(redisUrl), prefix, waitForConnection: true });
  await store.connect();
  const keys = [];
  for (let i = 0; i < keysPerClass; i++) {
    for (const kind of CLASSES) {
      const key = generateKey();
      keys.push({ kind, key });
      if (kind === 'unknown') continue;
      const id = generateKeyId();
      const allowed = kind === 'wrong address' ? ['192.0.2.0/24', '2001:db8::/32'] : ['127.0.0.1', '2001:db8::/32'];
      await store.create({ id, key_hash: hashKey(key), acquirer_id: 'acq_bench', permissions: ['eod_read'], allowed_ips: allowed, description: 'bench', created_at: new Date().toISOString(), disabled_at: null });
      if (kind === 'disabled') await store.disable(id, new Date());
    }
  }
  await store.close();
  return keys;
}

/** One request's latency in µs, and its status. */
function timed(agent, url, key) {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    http.get(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.resume();
      res.once('end', () => resolve({ status: res.statusCode, us: Number(process.hrtime.bigint() - start) / 1000 }));
    }).on('error', reject);
  });
}

/** Medians by phase and class, in µs. */
export async function measureVerdicts({ redisUrl, upstreamUrl, path: target, keysPerClass = 200, warmUp = 40 }) {
  const prefix = 'bench-verdicts:';
  const gateway = await startGateway({ REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix, UPSTREAM_URL: upstreamUrl, KEY_CACHE_TTL_MS: String(TTL_MS) });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const expected = { unknown: 401, disabled: 401, 'wrong address': 401, valid: 403 };
  try {
    const keys = await makeKeys(redisUrl, prefix, keysPerClass);
    const samples = Object.fromEntries(PHASES.map((p) => [p, Object.fromEntries(CLASSES.map((c) => [c, []]))]));
    for (const phase of PHASES) {
      if (phase === 'just expired') await new Promise((r) => setTimeout(r, TTL_MS + 100));
      const order = shuffled(keys);
      for (const [i, { kind, key }] of order.entries()) {
        const { status, us } = await timed(agent, `${gateway.url}${target}`, key);
        if (status !== expected[kind]) throw new Error(`verdicts: a ${kind} key got ${status}`);
        if (i >= warmUp) samples[phase][kind].push(us);
      }
    }
    return Object.fromEntries(PHASES.map((p) => [p, Object.fromEntries(CLASSES.map((c) => [c, median(samples[p][c])]))]));
  } finally {
    agent.destroy();
    await gateway.stop();
  }
}
