import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './app.js';
import { sendError, sendRawError } from './errors/error-response.js';
import type { Config } from './config/env.js';
import { loadPolicyOrThrow } from './config/load-policy.js';
import { KeyResolver } from './keys/key-resolver.js';
import type { KeyStore } from './keys/key-store.js';
import { RedisKeyStore } from './keys/redis-key-store.js';
import type { Logger } from './logger.js';
import type { CompiledPolicy } from './policy/compile.js';
import { createUpstreamAgent } from './proxy/upstream-proxy.js';

export interface RunningGateway {
  readonly server: http.Server;
  readonly port: number;
  readonly policy: CompiledPolicy;
  /** Stops accepting, lets in-flight requests finish, closes Redis and the upstream pool. */
  close(): Promise<void>;
}

export interface StartOptions {
  readonly logger: Logger;
  /** Instead of Redis (the embedded quickstart and tests). */
  readonly keyStore?: KeyStore;
}

/** Loads the policy, connects the key store and listens. Throws PolicyLoadError on a bad policy. */
export async function startGateway(config: Config, { logger, keyStore }: StartOptions): Promise<RunningGateway> {
  const policy = await loadPolicyOrThrow(config.policyFile);
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
  });
  const agent = createUpstreamAgent(config.upstreamUrl, config.upstreamMaxSockets);
  const app = createApp({
    policy: () => policy,
    resolver,
    trustedProxies: config.trustedProxyList,
    upstream: { url: config.upstreamUrl, timeoutMs: config.upstreamTimeoutMs, agent },
    logger,
  });
  // Host is checked by the request guard, so that its refusal has the documented body.
  const server = http.createServer({ requireHostHeader: false }, app);
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // A reset or timed-out socket has nobody to answer; anything else is a malformed request.
    if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return void socket.destroy();
    sendRawError(socket, err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400);
  });
  // An Expect other than 100-continue: Node would answer an empty 417; nothing here takes a body anyway.
  server.on('checkExpectation', (_req, res: http.ServerResponse) => sendError(res, 400));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, host: config.host, policy: policy.contentHash, routes: policy.routes.length }, 'listening');

  let closing: Promise<void> | undefined;
  return {
    server,
    port,
    policy,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
        });
        resolver.close();
        agent.destroy();
        if (keyStore === undefined) await store.close();
      })();
      return closing;
    },
  };
}
