import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminServer, type ReadinessCheck } from './admin/admin-server.js';
import { createApp } from './app/create-app.js';
import { MAX_PIPELINED_REQUESTS, trackConnectionAnswers } from './http/pipelining-and-drain.js';
import type { Config } from './config/env.js';
import { KeyResolver } from './keys/key-resolver.js';
import type { KeyStore } from './keys/key-store.js';
import { RedisKeyStore } from './keys/redis-key-store.js';
import type { Logger } from './observability/logger/logger.js';
import { attachHttpEdge } from './http/edge-events.js';
import { peerText } from './net/client-address.js';
import { lineThrottle } from './observability/line-throttle.js';
import { createMetrics, type GatewayMetrics } from './observability/metrics/metrics.js';
import type { CompiledPolicy } from './policy/compile.js';
import { MAX_HEADER_COUNT } from './plugins/request-guard/index.js';
import { youngCollector } from './node-internals/young-collection.js';
import { COLLECT_EVERY_BYTES } from './proxy/streamed-memory.js';
import { createUpstreamProxy } from './proxy/create-proxy.js';

/** Node's default is 30 s: HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS are enforced within this of their deadline. */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

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
  /**
   * Readiness turns 503, the listener stops accepting, requests in flight get up to
   * `shutdownTimeoutMs` to finish, then connections close, Redis disconnects and the pool empties.
   */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  readonly logger: Logger;
  /** Accepted by whoever reads the policy file (./config/policy-file.ts): never read here. */
  readonly policy: CompiledPolicy;
  /** Instead of Redis (the embedded quickstart and tests). */
  readonly keyStore?: KeyStore;
  /** A cluster worker (WORKERS above 1): no admin listener of its own. */
  readonly worker?: boolean;
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

/**
 * A constructor that makes what `base` makes, with `prototype` (which inherits from base's) as its
 * prototype. Node's IncomingMessage and ServerResponse are constructor functions of the old kind,
 * which build whatever object they are called on: called on the one `new` made here, they build it
 * as their own `new` would, without Reflect.construct and its array of arguments on every request.
 * (Both take at most two arguments.)
 */
function bornWith<T extends abstract new (...args: never[]) => object>(base: T, prototype: object): T {
  const build = base as unknown as (this: object, a: unknown, b: unknown) => void;
  function Born(this: object, a: unknown, b: unknown): void {
    build.call(this, a, b);
  }
  Born.prototype = prototype;
  return Born as unknown as T;
}

function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Connects the key store and listens. */
export async function startGateway(config: Config, { logger, policy: initialPolicy, keyStore, worker = false }: StartOptions): Promise<RunningGateway> {
  const metrics = createMetrics();
  let policy = initialPolicy;
  const usePolicy = (next: CompiledPolicy) => {
    policy = next;
    metrics.policyInfo.reset();
    metrics.policyInfo.set({ hash: next.contentHash }, 1);
  };
  usePolicy(initialPolicy);
  const store =
    keyStore ??
    new RedisKeyStore({
      url: config.redisUrl,
      prefix: config.redisKeyPrefix,
      commandTimeoutMs: config.redisCommandTimeoutMs,
      subscribe: true,
      onError: (err, context) => logger.warn({ err, context }, 'key store problem'),
    });
  const resolver = new KeyResolver(store, {
    ttlMs: config.keyCacheTtlMs,
    maxEntries: config.keyCacheMaxEntries,
    negativeTtlMs: config.keyNegativeCacheTtlMs,
    negativeMaxEntries: config.keyCacheMaxEntries,
    outageGraceMs: config.keyOutageGraceMs,
    onResolution: (layer, result) => metrics.keyResolutions.inc({ layer, result }),
    onStoreHealth: (healthy) => metrics.keyStoreUp.set(healthy ? 1 : 0),
  });
  metrics.keyStoreUp.set(resolver.storeAvailable ? 1 : 0);
  const collectYoung = youngCollector();
  const proxy = createUpstreamProxy({
    target: config.upstreamUrl,
    timeoutMs: config.upstreamTimeoutMs,
    idleTimeoutMs: config.streamIdleTimeoutMs,
    maxSockets: config.upstreamMaxSockets,
    logger,
    collectYoung,
    onRetry: () => metrics.upstreamRetries.inc(),
    onUnaskedBytes: () => metrics.upstreamUnaskedBytes.inc(),
  });
  const app = createApp({
    policy: () => policy,
    resolver,
    trustedProxies: config.trustedProxyList,
    proxy,
    logger,
    metrics,
    acquirerMaxInFlight: config.acquirerMaxInFlight,
  });

  let shuttingDown = false;
  // Host is checked by the request guard, so that its refusal has the documented body.
  const server = http.createServer(
    {
      // Every request and response is made with Express's prototypes from the start: Express swaps
      // them in for each otherwise (Object.setPrototypeOf, a call into V8's runtime that gives the
      // object a new map, twice a request), and an object that changes maps mid-way makes the code
      // that handles it before and after see more shapes than one.
      IncomingMessage: bornWith(http.IncomingMessage, app.request),
      ServerResponse: bornWith(http.ServerResponse, app.response),
      requireHostHeader: false,
      // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3), and no
      // route takes one: Node hands it over already ended, so the pipe httpxy makes from it to the
      // upstream request ends at once, without the stream's flow, 'end' event and unpipe. 9% of
      // the main thread's time per proxied request (bench/RESULTS.md, 2026-11-24). A request that
      // declares a body is still read as a stream, and refused (requestShape). Such a request reads as
      // destroyed from the start (`destroyed` true, `complete` false): nothing here looks at either,
      // and a client that goes away is seen through the response's 'close', never the request's.
      optimizeEmptyRequests: true,
      // How often Node looks for requests past HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS: its default,
      // every 30 s, let a slow-loris connection live up to 30 s past either.
      connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
    },
  );
  // Node drops header lines past maxHeadersCount without a word: one past the limit is kept, so that
  // the request guard sees the head is too long and refuses it. Unlimited (0), a head of thousands of
  // short lines cost about 5× the CPU of a plain one in Node's own header handling before the refusal.
  server.maxHeadersCount = MAX_HEADER_COUNT + 1;
  // MAX_CONNECTIONS is counted here, not by Node's maxConnections: under WORKERS a worker refusing a
  // connection that way gives it back to the primary, which hands it to the next worker, and round
  // again, a core spinning for as long as the connection stays open, which is then never closed.
  const dropped = dropWarning(logger, metrics, config.maxConnections);
  let openConnections = 0;
  server.on('connection', (socket) => {
    if (openConnections >= config.maxConnections) {
      socket.destroy();
      dropped();
      return;
    }
    openConnections++;
    socket.once('close', () => openConnections--);
  });
  const answers = trackConnectionAnswers(server, (socket) =>
    logger.warn({ limit: MAX_PIPELINED_REQUESTS, client: peerText(socket) }, 'a connection pipelined more requests than the limit ahead of their answers: closed'),
  );
  attachHttpEdge(server, { app, answers, metrics, logger });

  const readiness = (): ReadinessCheck => ({
    policy: 'ok',
    key_store: resolver.storeAvailable ? 'ok' : 'unavailable',
    shutdown: shuttingDown ? 'in_progress' : 'no',
  });
  const admin = worker
    ? null
    : createAdminServer({ metrics: { contentType: metrics.registry.contentType, text: () => metrics.registry.metrics() }, readiness });

  const port = await listen(server, config.port, config.host).catch((err: NodeJS.ErrnoException) => {
    throw new ListenError('gateway', err);
  });
  let adminPort: number | null = null;
  try {
    if (admin !== null) adminPort = await listen(admin, config.adminPort, config.adminHost);
  } catch (err) {
    server.close();
    throw new ListenError('admin', err as NodeJS.ErrnoException);
  }
  const where = {
    port,
    host: config.host,
    policy: policy.contentHash,
    routes: policy.routes.length,
    streamed_gc_every_mib: collectYoung === undefined ? null : COLLECT_EVERY_BYTES / 2 ** 20,
  };
  if (collectYoung === undefined) {
    logger.warn('node runs without --expose-gc (the flags of dist/cli.js\'s shebang): large downloads will hold tens of MiB more memory');
  }
  if (admin === null) logger.info(where, 'worker listening');
  else logger.info({ ...where, admin_port: adminPort, admin_host: config.adminHost }, 'listening');

  let stopped: Promise<void> | undefined;
  return {
    port,
    adminPort,
    metrics,
    readiness,
    get policy() {
      return policy;
    },
    usePolicy,
    shutdown() {
      stopped ??= (async () => {
        shuttingDown = true;
        answers.drain();
        logger.info({ deadline_ms: config.shutdownTimeoutMs }, 'shutting down: draining requests in flight');
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        let deadline: NodeJS.Timeout | undefined;
        const timedOut = new Promise<'timeout'>((resolve) => (deadline = setTimeout(() => resolve('timeout'), config.shutdownTimeoutMs)));
        if ((await Promise.race([drained, timedOut])) === 'timeout') {
          logger.warn('shutdown deadline passed: closing the connections still open');
          // An answer under way is cut as any other cut short: reset where a close would be its end.
          answers.cutAll();
          server.closeAllConnections();
          await drained;
        }
        clearTimeout(deadline);
        resolver.close();
        proxy.close();
        if (keyStore === undefined) await store.close();
        if (admin !== null) {
          admin.closeAllConnections();
          await new Promise((resolve) => admin.close(resolve));
        }
        logger.info('stopped');
      })();
      return stopped;
    },
  };
}

/** How often, at most, a flood of connections past MAX_CONNECTIONS is logged. */
const DROP_WARNING_EVERY_MS = 10_000;

/**
 * Counts each connection closed for being past MAX_CONNECTIONS, and says so at `warn`: at once for
 * the first, then at most every DROP_WARNING_EVERY_MS with how many since, so a flood of connections
 * does not become a flood of log lines.
 */
function dropWarning(logger: Logger, metrics: GatewayMetrics, limit: number): () => void {
  const warning = lineThrottle(DROP_WARNING_EVERY_MS);
  return () => {
    metrics.connectionsDropped.inc();
    const heldBack = warning('');
    if (heldBack !== null) logger.warn({ limit, dropped: heldBack.count + 1 }, 'client connections past MAX_CONNECTIONS closed as they were accepted');
  };
}
