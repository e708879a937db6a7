/**
 * @module
 * The public HTTP server: Node's options and limits, the connection limit, each connection's answers
 * in order (pipelining-and-drain.ts), and what happens before the app (edge-events.ts).
 */
import type { Express } from 'express';
import type { Config } from '../config/env.js';
import { peerText } from '../net/client-address.js';
import { IdleAwareServer } from '../node-internals/idle-connections.js';
import { lineThrottle } from '../observability/line-throttle.js';
import type { Logger } from '../observability/logger/logger.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';
import { MAX_HEADER_COUNT } from '../plugins/request-guard/index.js';
import { attachHttpEdge } from './edge-events.js';
import { MAX_PIPELINED_REQUESTS, trackConnectionAnswers, type ConnectionAnswers } from './pipelining-and-drain.js';

/** Node's default is 30 s: HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS are enforced within this of their deadline. */
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/** How often, at most, a flood of connections past MAX_CONNECTIONS is logged. */
const DROP_WARNING_EVERY_MS = 10_000;

export type ServerConfig = Pick<Config, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxConnections'>;

export interface GatewayServer {
  readonly server: IdleAwareServer;
  readonly answers: ConnectionAnswers;
}

/** The public server for `app`; not yet listening. */
export function createGatewayServer(config: ServerConfig, app: Express, { metrics, logger }: { metrics: GatewayMetrics; logger: Logger }): GatewayServer {
  const server = new IdleAwareServer({
    // Host is checked by the request guard, so that its refusal has the documented body.
    requireHostHeader: false,
    // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3): handed over
    // already ended, it goes upstream without a stream's flow (docs/performance.md). One that
    // declares a body is still read as a stream. Such a request reads as destroyed from the start:
    // a client that goes away is seen through the response's 'close', never the request's.
    optimizeEmptyRequests: true,
    connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
  });
  // Node drops header lines past maxHeadersCount without a word: one past the limit is kept, so that
  // the request guard sees the head is too long and refuses it.
  server.maxHeadersCount = MAX_HEADER_COUNT + 1;
  limitConnections(server, config.maxConnections, connectionsDropped(logger, metrics, config.maxConnections));
  const answers = trackConnectionAnswers(server, (socket) => logger.event('pipelining_limit', { limit: MAX_PIPELINED_REQUESTS, client: peerText(socket) }));
  attachHttpEdge(server, { app, answers, metrics, logger });
  return { server, answers };
}

/**
 * MAX_CONNECTIONS, counted here rather than by Node's maxConnections: under WORKERS a worker refusing
 * a connection that way gives it back to the primary, which hands it to the next worker, and round
 * again, a core spinning for as long as the connection stays open.
 */
function limitConnections(server: IdleAwareServer, limit: number, dropped: () => void): void {
  let open = 0;
  server.on('connection', (socket) => {
    if (open >= limit) {
      socket.destroy();
      dropped();
      return;
    }
    open++;
    socket.once('close', () => open--);
  });
}

/**
 * Counts each connection closed for being past MAX_CONNECTIONS, and says so at `warn`: at once for
 * the first, then at most every DROP_WARNING_EVERY_MS with how many since.
 */
function connectionsDropped(logger: Logger, metrics: GatewayMetrics, limit: number): () => void {
  const warning = lineThrottle(DROP_WARNING_EVERY_MS);
  return () => {
    metrics.connectionsDropped.inc();
    const heldBack = warning('');
    if (heldBack !== null) logger.event('connections_dropped', { limit, dropped: heldBack.count + 1 });
  };
}
