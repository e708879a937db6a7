import { urlTarget } from '../../src/keys/redis-target.js';
import { KeyResolver, type KeyVerdict } from '../../src/keys/key-resolver.js';
import { generateKey, hashKey } from '../../src/keys/api-key.js';
import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { parseAddress } from '../../src/net/ip-allowlist.js';
import { newRecord } from '../helpers/key-store-contract.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Unknown, disabled, wrong-address and valid keys get the same bytes when refused; this checks they
 * also take the same time to judge, on each of the three lookups a prober can cause: the first, a
 * cached one, and the first after the verdict expired. Classes are measured interleaved, in a
 * shuffled order each round, against a real Redis; medians are compared, so one slow sample
 * (a collection, another process) does not decide. bench/ reports the same medians side by side.
 */
const CLASSES = ['unknown', 'disabled', 'wrong_address', 'valid'] as const;
type KeyClass = (typeof CLASSES)[number];
const PHASES = ['first', 'cached', 'just_expired'] as const;
const ROUNDS = 300;
const WARM_UP = 50;
const TTL_MS = 60_000;
const CLIENT = parseAddress('198.51.100.20')!;
/** What a record's whitelist holds: as many entries as the stand-in record's (key-verdict.ts). */
const WHITELIST = { valid: ['198.51.100.0/24', '2001:db8:1::/48'], other: ['192.0.2.0/24', '2001:db8:2::/48'] };

let redis: TestRedis;
let store: RedisKeyStore;
let resolver: KeyResolver;
let now = 0;

beforeAll(async () => {
  redis = await startTestRedis();
  store = new RedisKeyStore({ target: urlTarget(redis.url), prefix: redis.prefix, subscribe: true });
  resolver = new KeyResolver(store, { ttlMs: TTL_MS, now: () => now });
  // Change notices live: verdicts are trusted for the TTL, not the 1 s of a gateway without them.
  await waitFor(() => resolver.changeNotices, { what: 'the change-notice subscription' });
});

afterAll(async () => {
  resolver?.close();
  await store?.close();
  await redis?.stop();
});

async function keyOf(kind: KeyClass): Promise<string> {
  if (kind === 'unknown') return hashKey(generateKey());
  const record = newRecord({ allowed_ips: kind === 'valid' ? WHITELIST.valid : WHITELIST.other });
  await store.create(record);
  if (kind === 'disabled') await store.disable(record.id, new Date());
  return record.key_hash;
}

/** What the request path does with a key: resolve it, then check the client's address. */
function allowed(verdict: KeyVerdict): boolean {
  return verdict.kind === 'valid' && (verdict.key.allowlist === null || verdict.key.allowlist.contains(CLIENT));
}

async function judge(hash: string): Promise<{ allowed: boolean; ns: number }> {
  const start = process.hrtime.bigint();
  const verdict = resolver.fromMemory(hash) ?? (await resolver.resolve(hash));
  const ok = allowed(verdict);
  return { allowed: ok, ns: Number(process.hrtime.bigint() - start) };
}

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

it('judges unknown, disabled, wrong-address and valid keys in the same time: first, cached and just-expired lookups', async () => {
  const samples = Object.fromEntries(PHASES.map((p) => [p, Object.fromEntries(CLASSES.map((c) => [c, [] as number[]]))])) as Record<(typeof PHASES)[number], Record<KeyClass, number[]>>;
  for (let round = 0; round < ROUNDS; round++) {
    const keys = Object.fromEntries(await Promise.all(CLASSES.map(async (c) => [c, await keyOf(c)] as const))) as Record<KeyClass, string>;
    for (const phase of PHASES) {
      if (phase === 'just_expired') now += TTL_MS;
      for (const kind of shuffled(CLASSES)) {
        const { allowed: ok, ns } = await judge(keys[kind]);
        expect([kind, ok]).toEqual([kind, kind === 'valid']);
        if (round >= WARM_UP) samples[phase][kind].push(ns);
      }
    }
  }
  const report: string[] = [];
  for (const phase of PHASES) {
    const medians = CLASSES.map((c) => median(samples[phase][c]) / 1000);
    report.push(`${phase}: ${CLASSES.map((c, i) => `${c} ${medians[i]!.toFixed(1)} µs`).join(', ')}`);
    const [low, high] = [Math.min(...medians), Math.max(...medians)];
    // A Redis round trip on one class only is tens of times a memory hit; a record judged for one
    // class only adds a fifth or more to a lookup. The benchmark holds the medians within 10%; here a
    // looser bound keeps a shared machine's noise from failing the test, and still catches either.
    const spread = phase === 'cached' ? high - low <= Math.max(0.5 * high, 2) : high / low <= 1.15;
    if (!spread) throw new Error(`lookups of one class take longer than another's:\n${report.join('\n')}`);
  }
  console.log(report.join('\n'));
}, 60_000);
