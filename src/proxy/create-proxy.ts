/**
 * @module
 * The proxy step: http-proxy-middleware, used through its documented interface (its plugin list and
 * `on.proxyReq`, `on.proxyRes`, `on.error`), wired to the units that decide each part of an exchange.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { RequestHandler } from 'express';
import { createProxyMiddleware, proxyEventsPlugin } from 'http-proxy-middleware';
import { EXCHANGE_HEADER } from '../net/header-names.js';
import type { CollectYoung } from '../node-internals/young-collection.js';
import type { Logger } from '../observability/logger/logger.js';
import { createAcquirerSigner } from './acquirer-signature.js';
import { passAnswer } from './answer.js';
import { Exchange, ExchangeWatch } from './exchange.js';
import { onWatchVerdict } from './failures.js';
import { buildUpstreamHeaders } from './request-headers.js';
import { upstreamAddress } from './response-headers.js';
import { createSendTogether } from './send-together.js';
import { createStreamedMemory } from './streamed-memory.js';
import { createUpstreamAgent, type UpstreamAgent, type UpstreamAgentOptions } from './upstream-agent.js';
import { onUpstreamError, unaskedBytesReporter } from './upstream-error.js';
import { onUpstreamRequest } from './upstream-request.js';

export interface UpstreamProxyOptions {
  /** Origin of the upstream service (UPSTREAM_URL). */
  readonly target: string;
  /** Time allowed until the upstream's response headers arrive; then 504 (UPSTREAM_TIMEOUT_MS). */
  readonly timeoutMs: number;
  /** Once the answer streams: nothing passing to the client for this long cuts it (STREAM_IDLE_TIMEOUT_MS). */
  readonly idleTimeoutMs: number;
  /** Connections to the upstream, at most (UPSTREAM_MAX_SOCKETS). */
  readonly maxSockets: number;
  /** ACQUIRER_SIGNING_SECRET's secrets, newest first (acquirer-signature.ts); none: nothing is signed. */
  readonly signingSecrets?: readonly string[];
  readonly logger: Logger;
  /** Frees the dead read buffers of streamed bodies every few MiB (streamed-memory.ts); none: left to V8. */
  readonly collectYoung?: CollectYoung | undefined;
  /** Called once for each request sent a second time (retry.ts). */
  readonly onRetry?: () => void;
  /** Called once for each idle pooled connection the upstream sent bytes on. */
  readonly onUnaskedBytes?: () => void;
  /** Milliseconds on a monotonic clock (tests inject one). */
  readonly now?: () => number;
  /** Name resolution other than the system's (tests fake it). */
  readonly lookup?: UpstreamAgentOptions['lookup'];
}

export interface UpstreamProxy {
  /** The dispatch step's way upstream: forwards an allowed request. */
  readonly forward: RequestHandler;
  readonly agent: UpstreamAgent;
  /** Closes the pool's connections (at shutdown). */
  close(): void;
}

/**
 * Forwards an allowed request: the path exactly as matched, the query unchanged, headers filtered
 * and the acquirer header set from the key (and signed, given `signingSecrets`). Answers stream back;
 * error statuses, failures and timeouts become documented gateway errors.
 * @example createUpstreamProxy({ target: 'http://statements:8080', timeoutMs: 30_000, idleTimeoutMs: 60_000, maxSockets: 256, logger })
 */
export function createUpstreamProxy(options: UpstreamProxyOptions): UpstreamProxy {
  const { logger } = options;
  // Parsed once: given the string, http-proxy-middleware and httpxy would parse it on every request.
  const target = new URL(options.target);
  const agent = createUpstreamAgent(target, { maxSockets: options.maxSockets, onUnaskedBytes: unaskedBytesReporter(logger, options.onUnaskedBytes), lookup: options.lookup });
  const watch = new ExchangeWatch(options, (exchange, verdict) => onWatchVerdict(exchange, verdict, { logger, agent, idleTimeoutMs: options.idleTimeoutMs }), options.now);
  const answers = { logger, address: upstreamAddress(target), watch, watchStreamedBody: options.collectYoung && createStreamedMemory(options.collectYoung) };
  const failures = { logger, agent, onRetry: options.onRetry, resend: (exchange: Exchange) => send(exchange) };
  const onError = (err: Error, req: Parameters<typeof onUpstreamError>[1], res: Parameters<typeof onUpstreamError>[2]) => onUpstreamError(err, req, res, failures);
  const proxy = createProxyMiddleware({
    target,
    agent,
    selfHandleResponse: true,
    // The events plugin alone: the others log per request, or answer failures in plain text.
    ejectPlugins: true,
    plugins: [proxyEventsPlugin],
    on: { proxyReq: (proxyReq, req, res) => onUpstreamRequest(proxyReq, req, res, onError), proxyRes: (proxyRes, _req, res) => passAnswer(proxyRes, res, answers), error: onError },
  });

  /** Sends a judged request upstream, unless it was answered or its client left while it waited. */
  const send = (exchange: Exchange): void => {
    const { res, next } = exchange;
    if (res.req.socket.destroyed || exchange.answered) return;
    try {
      proxy(res.req, res, next).then(undefined, (err: unknown) => next(err || new Error('Rejected promise')));
    } catch (err) {
      next(err || new Error('Thrown without a reason')); // not into the others of its batch
    }
  };
  const sendSoon = createSendTogether(send);
  const upstreamHost = target.host;
  const sign = createAcquirerSigner(options.signingSecrets ?? []);
  let exchanges = 0;

  const forward: RequestHandler = function forwardUpstream(req, res, next) {
    // The client left while its key was looked up, or while its request waited for the connection.
    if (req.socket.destroyed) return;
    const { policy, key, requestId } = res.locals;
    const exchange = new Exchange(String(++exchanges), res, next, watch.now());
    const headers = buildUpstreamHeaders(req.headers, policy.acquirerHeader, key!.acquirerId, requestId);
    headers.host = upstreamHost;
    headers[EXCHANGE_HEADER] = exchange.id;
    // req.url is the request-target sent: UPSTREAM_URL is an origin, so the proxy adds no base path.
    sign?.(headers, req.method, req.url, key!);
    // A checked body goes as the exact bytes that arrived, framed by their length (upstream-request.ts writes them).
    const body = res.locals.body;
    if (body !== undefined) {
      headers['content-type'] = req.headers['content-type'];
      headers['content-length'] = String(body.length);
      // A write's answer is small, and an explanation must be read to be passed (error-body.ts).
      headers['accept-encoding'] = 'identity';
    }
    req.headers = headers as IncomingHttpHeaders;
    res.locals.upstream = exchange;
    watch.start(exchange);
    // A response closes once, however it ends; one cut short takes its upstream request with it,
    // sent or still queued for a connection.
    res.on('close', () => {
      clearTimeout(exchange.timer);
      if (!res.writableFinished) (exchange.proxyReq ?? agent.takeWaiting(exchange.id))?.destroy();
    });
    sendSoon(exchange);
  };
  return { forward, agent, close: () => agent.destroy() };
}
