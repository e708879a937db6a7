import { createApp } from '../../src/app/create-app.js';
import { DEFAULT_UPSTREAM_MAX_SOCKETS } from '../../src/config/defaults.js';
import { createUpstreamProxy } from '../../src/proxy/create-proxy.js';
import { generateKey, hashKey, type ApiKeyRecord } from '../../src/keys/api-key.js';
import { KeyResolver } from '../../src/keys/key-resolver.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { silentLogger } from '../../src/observability/logger/logger.js';
import { createMetrics } from '../../src/observability/metrics/metrics.js';
import type { IpAllowlist } from '../../src/net/ip-allowlist.js';
import type { CompiledPolicy } from '../../src/policy/compile.js';
import type { RateLimiter } from '../../src/limits/rate-limiter.js';
import { newRecord } from './key-store-contract.js';
import { shippedPolicy } from './policy.js';

export interface TestApp {
  readonly app: ReturnType<typeof createApp>;
  readonly store: MemoryKeyStore;
  readonly policy: CompiledPolicy;
  /** Creates a key in the store and returns its secret. */
  addKey(overrides?: Partial<ApiKeyRecord>): Promise<{ key: string; record: ApiKeyRecord }>;
  close(): void;
}

/** The real app with an in-memory key store, for supertest and nock. */
export async function createTestApp(options: {
  upstreamUrl: string;
  upstreamTimeoutMs?: number;
  streamIdleTimeoutMs?: number;
  trustedProxies?: IpAllowlist | null;
  policy?: CompiledPolicy;
  collectYoung?: () => void;
  acquirerMaxInFlight?: number;
  rateLimiter?: RateLimiter;
  rateLimitFailClosed?: boolean;
}): Promise<TestApp> {
  const policy = options.policy ?? (await shippedPolicy());
  const store = new MemoryKeyStore();
  const resolver = new KeyResolver(store);
  const metrics = createMetrics();
  const proxy = createUpstreamProxy({
    target: options.upstreamUrl,
    timeoutMs: options.upstreamTimeoutMs ?? 5000,
    idleTimeoutMs: options.streamIdleTimeoutMs ?? 5000,
    maxSockets: DEFAULT_UPSTREAM_MAX_SOCKETS,
    logger: silentLogger,
    collectYoung: options.collectYoung,
    onRetry: () => metrics.upstreamRetries.inc(),
    onUnaskedBytes: () => metrics.upstreamUnaskedBytes.inc(),
  });
  const app = createApp({
    policy: () => policy,
    resolver,
    trustedProxies: options.trustedProxies ?? null,
    proxy,
    logger: silentLogger,
    metrics,
    acquirerMaxInFlight: options.acquirerMaxInFlight,
    rateLimiter: options.rateLimiter,
    rateLimitFailClosed: options.rateLimitFailClosed,
  });
  return {
    app,
    store,
    policy,
    async addKey(overrides = {}) {
      const key = generateKey();
      const record = newRecord({ key_hash: hashKey(key), ...overrides });
      await store.create(record);
      return { key, record };
    },
    close() {
      resolver.close();
      proxy.close();
    },
  };
}
