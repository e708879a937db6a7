/**
 * @module
 * One gateway process (or one cluster worker): the key store and its cache, the upstream proxy, the
 * app, the public server and the admin listener, composed and started; and their shutdown.
 */
import { createAdminServer, type AdminServer, type ReadinessCheck } from './admin/admin-server.js';
import { createApp } from './app/create-app.js';
import type { Config } from './config/env.js';
import { createGatewayServer, type GatewayServer } from './http/create-server.js';
import { listen } from './http/listen.js';
import { KeyResolver, type StoreHealth } from './keys/key-resolver.js';
import { redisTarget } from './keys/redis-target.js';
import type { KeyStore } from './keys/key-store.js';
import { RedisKeyStore } from './keys/redis-key-store.js';
import { youngCollector } from './node-internals/young-collection.js';
import type { Logger } from './observability/logger/logger.js';
import { createMetrics, type GatewayMetrics } from './observability/metrics/metrics.js';
import type { CompiledPolicy } from './policy/compile.js';
import type { LoadedPolicy } from './policy/load.js';
import { PolicyFile } from './policy/watch.js';
import { createUpstreamProxy, type UpstreamProxy } from './proxy/create-proxy.js';
import { COLLECT_EVERY_BYTES } from './proxy/streamed-memory.js';
import { lineThrottle } from './observability/line-throttle.js';
import { RateLimits } from './limits/rate-limits.js';

export interface RunningGateway {
  readonly port: number;
  /** null for a cluster worker: the primary serves the admin endpoints for all of them. */
  readonly adminPort: number | null;
  readonly metrics: GatewayMetrics;
  readiness(): ReadinessCheck;
  /** The policy it runs. */
  readonly policy: CompiledPolicy;
  /** Runs `policy` from now on: a request reads the policy once, when it is judged, so none changes mid-way. */
  usePolicy(policy: CompiledPolicy): void;
  /** Judges in the shadow by `policy` from now on; only for a gateway started with a shadow policy. */
  useShadowPolicy(policy: CompiledPolicy): void;
  /**
   * Readiness turns 503, the listener stops accepting, requests in flight get up to
   * SHUTDOWN_TIMEOUT_MS to finish, then connections close, Redis disconnects and the pool empties.
   */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  readonly logger: Logger;
  /** Accepted by whoever reads the policy file (policy/watch.ts): never read here. */
  readonly policy: CompiledPolicy;
  /** Instead of Redis (the embedded quickstart and tests). */
  readonly keyStore?: KeyStore;
  /** A cluster worker (WORKERS above 1): no admin listener of its own. */
  readonly worker?: boolean;
  /** POLICY_SHADOW_FILE's, accepted like `policy`: every request is judged by it too, never enforced. */
  readonly shadowPolicy?: CompiledPolicy | undefined;
}

/**
 * The policy file, followed for `gateway`: each accepted reload runs from the next request on, and
 * the file is watched when POLICY_WATCH says so (a SIGHUP reloads it either way: `reload`).
 */
export function followPolicyFile(gateway: RunningGateway, config: Pick<Config, 'policyFile' | 'policyWatch'>, loaded: LoadedPolicy, logger: Logger): PolicyFile {
  const policyFile = new PolicyFile(config.policyFile, loaded, { logger, reloads: gateway.metrics.policyReloads, onAccepted: (next) => gateway.usePolicy(next.policy) });
  if (config.policyWatch) void policyFile.watch();
  return policyFile;
}

/** The shadow policy file (POLICY_SHADOW_FILE), followed as the policy file is (followPolicyFile). */
export function followShadowFile(gateway: RunningGateway, config: Pick<Config, 'policyShadowFile' | 'policyWatch'>, loaded: LoadedPolicy, logger: Logger): PolicyFile {
  const shadowFile = new PolicyFile(config.policyShadowFile, loaded, {
    logger,
    holds: 'shadow',
    onAccepted: (next) => gateway.useShadowPolicy(next.policy),
  });
  if (config.policyWatch) void shadowFile.watch();
  return shadowFile;
}

/** A listen that failed, and whether it was the admin listener's (ADMIN_HOST, ADMIN_PORT) or the gateway's own (HOST, PORT). */
export class ListenError extends Error {
  readonly listener: 'gateway' | 'admin';
  override readonly cause: NodeJS.ErrnoException;
  constructor(listener: 'gateway' | 'admin', cause: NodeJS.ErrnoException) {
    super(cause.message, { cause });
    this.listener = listener;
    this.cause = cause;
  }
}

/** What a started gateway is made of, for its shutdown. */
interface Parts {
  readonly config: Config;
  readonly logger: Logger;
  readonly http: GatewayServer;
  readonly admin: AdminServer | null;
  readonly resolver: KeyResolver;
  /** The store the gateway opened itself (Redis), and so closes; not one it was given. */
  readonly ownStore: KeyStore | undefined;
  readonly proxy: UpstreamProxy;
  readonly rateLimits: RateLimits;
}

/** Connects the key store and listens. */
export async function startGateway(config: Config, { logger, policy: initialPolicy, keyStore, worker = false, shadowPolicy }: StartOptions): Promise<RunningGateway> {
  const metrics = createMetrics({ shadow: shadowPolicy !== undefined });
  let shadow = shadowPolicy;
  const rateLimits = openRateLimits(config, keyStore === undefined, metrics, logger);
  const policy = new CurrentPolicy(initialPolicy, metrics, rateLimits);
  const ownStore = keyStore === undefined ? openRedisStore(config, logger) : undefined;
  const resolver = createResolver(config, keyStore ?? ownStore!, metrics);
  const collectYoung = youngCollector();
  const proxy = createUpstreamProxy({
    target: config.upstreamUrl,
    timeoutMs: config.upstreamTimeoutMs,
    idleTimeoutMs: config.streamIdleTimeoutMs,
    maxSockets: config.upstreamMaxSockets,
    signingSecrets: config.acquirerSigningSecret,
    logger,
    collectYoung,
    onRetry: () => metrics.upstreamRetries.inc(),
    onUnaskedBytes: () => metrics.upstreamUnaskedBytes.inc(),
  });
  const app = createApp({
    policy: policy.get,
    resolver,
    trustedProxies: config.trustedProxyList,
    proxy,
    logger,
    metrics,
    acquirerMaxInFlight: config.acquirerMaxInFlight,
    rateLimiter: rateLimits,
    rateLimitFailClosed: config.rateLimitFail === 'closed',
    shadowPolicy: shadow === undefined ? undefined : () => shadow!,
  });
  const http = createGatewayServer(config, app, { metrics, logger });
  let shuttingDown = false;
  const readiness = (): ReadinessCheck => ({ policy: 'ok', key_store: keyStoreReadiness(resolver), shutdown: shuttingDown ? 'in_progress' : 'no' });
  const admin = worker ? null : createAdminServer({ metrics: { contentType: metrics.registry.contentType, text: () => metrics.registry.metrics() }, readiness, token: config.adminToken });
  const { port, adminPort } = await listenBoth(http, admin, config);
  logListening(logger, config, { port, adminPort, policy: policy.get(), collectYoung: collectYoung !== undefined });
  const parts: Parts = { config, logger, http, admin, resolver, ownStore, proxy, rateLimits };
  let stopped: Promise<void> | undefined;
  return {
    port,
    adminPort,
    metrics,
    readiness,
    get policy() {
      return policy.get();
    },
    usePolicy: (next) => policy.use(next),
    useShadowPolicy: (next) => {
      if (shadow === undefined) throw new Error('started without a shadow policy');
      shadow = next;
    },
    shutdown: () => (stopped ??= ((shuttingDown = true), shutdown(parts))),
  };
}

/** The policy requests are judged by, and `policy_info` saying which it is. */
class CurrentPolicy {
  #policy: CompiledPolicy;
  readonly #metrics: GatewayMetrics;
  readonly #rateLimits: RateLimits;

  constructor(policy: CompiledPolicy, metrics: GatewayMetrics, rateLimits: RateLimits) {
    this.#policy = policy;
    this.#metrics = metrics;
    this.#rateLimits = rateLimits;
    this.use(policy);
  }

  readonly get = (): CompiledPolicy => this.#policy;

  use(next: CompiledPolicy): void {
    this.#policy = next;
    this.#rateLimits.use(next);
    this.#metrics.policyInfo.reset();
    this.#metrics.policyInfo.set({ hash: next.contentHash }, 1);
  }
}

/**
 * How often, at most, one key store problem is logged: a subscription Redis refuses is asked again ten
 * times a second, and a stack for each would bury everything else.
 */
export const KEY_STORE_PROBLEM_EVERY_MS = 5_000;

function openRedisStore(config: Config, logger: Logger): RedisKeyStore {
  const problem = lineThrottle(KEY_STORE_PROBLEM_EVERY_MS);
  return new RedisKeyStore({
    target: redisTarget(config),
    prefix: config.redisKeyPrefix,
    pepper: config.keyHashPepper,
    commandTimeoutMs: config.redisCommandTimeoutMs,
    subscribe: true,
    onError: (err, context) => {
      const heldBack = problem(`${context}\u0000${err instanceof Error ? err.message : String(err)}`);
      if (heldBack === null) return;
      const leftOut = heldBack.count > 0 ? { same_problems_unwritten: heldBack.count, unwritten_after_ms_ago: heldBack.lastWrittenMsAgo } : {};
      logger.event('key_store_problem', { err, context, ...leftOut });
    },
  });
}

/** The keys' budgets (RATE_LIMIT_STORE), in the gateway's Redis unless it was given a store of its own. */
function openRateLimits(config: Config, inRedis: boolean, metrics: GatewayMetrics, logger: Logger): RateLimits {
  const problem = lineThrottle(KEY_STORE_PROBLEM_EVERY_MS);
  return new RateLimits({
    store: config.rateLimitStore,
    redis: inRedis ? { target: redisTarget(config), prefix: config.redisKeyPrefix, commandTimeoutMs: config.redisCommandTimeoutMs } : undefined,
    onStoreError: (err, context) => {
      metrics.rateLimitStoreErrors.inc({ context });
      if (problem(`${context}\u0000${err instanceof Error ? err.message : String(err)}`) !== null) logger.event('rate_limit_store_problem', { err, context });
    },
    onInstances: (count) => metrics.rateLimitInstances.set(count),
  });
}

function createResolver(config: Config, store: KeyStore, metrics: GatewayMetrics): KeyResolver {
  const resolver = new KeyResolver(store, {
    ttlMs: config.keyCacheTtlMs,
    maxEntries: config.keyCacheMaxEntries,
    negativeMaxEntries: config.keyCacheMaxEntries,
    outageGraceMs: config.keyOutageGraceMs,
    pepper: config.keyHashPepper,
    onResolution: (layer, result) => metrics.keyResolutions.inc({ layer, result }),
    onStoreHealth: (health) => reportStoreHealth(metrics, health),
  });
  reportStoreHealth(metrics, { available: resolver.storeAvailable, notices: resolver.changeNotices });
  // Watched after the resolver, so that a change is timed once it is applied. Clocks of two hosts:
  // a negative span (skew) counts as none.
  store.watch((event) => {
    if (event.type === 'changed' && event.publishedAt !== undefined) metrics.keyChangePropagation.observe(Math.max(0, Date.now() - event.publishedAt) / 1000);
  });
  return resolver;
}

/** What readiness says of the key store: without change notices it serves (verdicts trusted 1 s), so it is ready. */
function keyStoreReadiness(resolver: KeyResolver): ReadinessCheck['key_store'] {
  if (!resolver.storeAvailable) return 'unavailable';
  return resolver.changeNotices ? 'ok' : 'no_change_notices';
}

function reportStoreHealth(metrics: GatewayMetrics, health: StoreHealth): void {
  metrics.keyStoreUp.set(health.available ? 1 : 0);
  metrics.keyChangeNoticesUp.set(health.notices ? 1 : 0);
}

/** The public listener, then the admin one; a failure says which (ListenError), and closes what was opened. */
async function listenBoth(http: GatewayServer, admin: AdminServer | null, config: Config): Promise<{ port: number; adminPort: number | null }> {
  const port = await listen(http.server, config.port, config.host).catch((err: NodeJS.ErrnoException) => {
    throw new ListenError('gateway', err);
  });
  if (admin === null) return { port, adminPort: null };
  try {
    return { port, adminPort: await listen(admin, config.adminPort, config.adminHost) };
  } catch (err) {
    http.server.close();
    throw new ListenError('admin', err as NodeJS.ErrnoException);
  }
}

function logListening(logger: Logger, config: Config, { port, adminPort, policy, collectYoung }: { port: number; adminPort: number | null; policy: CompiledPolicy; collectYoung: boolean }): void {
  if (!collectYoung) logger.event('expose_gc_missing');
  const where = { port, host: config.host, policy: policy.contentHash, routes: policy.routes.length, streamed_gc_every_mib: collectYoung ? COLLECT_EVERY_BYTES / 2 ** 20 : null };
  if (adminPort === null) logger.event('worker_listening', where);
  else logger.event('listening', { ...where, admin_port: adminPort, admin_host: config.adminHost });
}

/** The drain: requests in flight get SHUTDOWN_TIMEOUT_MS, then what is still open is cut. */
async function shutdown({ config, logger, http, admin, resolver, ownStore, proxy, rateLimits }: Parts): Promise<void> {
  const { server, answers } = http;
  answers.drain();
  void rateLimits.leave();
  logger.event('shutting_down', { deadline_ms: config.shutdownTimeoutMs });
  const drained = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  let deadline: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (deadline = setTimeout(() => resolve('timeout'), config.shutdownTimeoutMs)));
  if ((await Promise.race([drained, timedOut])) === 'timeout') {
    logger.event('shutdown_deadline_passed');
    // An answer under way is cut as any other cut short: reset where a close would be its end.
    answers.cutAll();
    server.closeAllConnections();
    await drained;
  }
  clearTimeout(deadline);
  resolver.close();
  proxy.close();
  await rateLimits.close();
  await ownStore?.close();
  if (admin !== null) {
    admin.closeAllConnections();
    await new Promise((resolve) => admin.close(resolve));
  }
  logger.event('stopped');
}
