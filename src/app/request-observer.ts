import { randomUUID } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { ERROR_CODES, type DenialReason, type ErrorDefinition } from '../errors/codes.js';
import type { Logger } from '../observability/logger/logger.js';
import { clientText, peerAddress, requestClient } from '../net/client-address.js';
import type { IpAllowlist } from '../net/ip-allowlist.js';
import { clientRequestId, loggedPath, writeAccessLine, writeAuditLine } from '../observability/access-line.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { createRequestLocals } from './request-context.js';
import { countRequest } from '../observability/metrics/count-request.js';
import { UNMATCHED_ROUTE } from '../observability/metrics/labels.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';
import type { ShadowObserver } from './shadow-observer.js';

export interface RequestObserverDeps {
  readonly policy: () => CompiledPolicy;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly trustedProxies: IpAllowlist | null;
  /** With a shadow policy (POLICY_SHADOW_FILE): called once the response is over. */
  readonly shadow?: ShadowObserver | undefined;
}

/**
 * The first middleware: fixes the policy the request is judged by, gives it a request id, and when
 * the response is over records its metrics and writes its one access log line.
 */
export function createRequestObserver({ policy, metrics, logger, trustedProxies, shadow }: RequestObserverDeps): RequestHandler {
  return function requestObserver(req, res, next) {
    const startedAt = performance.now(); // a number: hrtime.bigint() allocates a BigInt per call
    // Always the gateway's own: a client's id is neither unique nor the gateway's to vouch for in
    // logs and upstream; the access line shows it apart (client_request_id).
    const requestId = randomUUID();
    // Read now: the proxy puts the gateway's own into the headers it forwards.
    const clientId = req.headers['x-request-id'];
    // Replaces Express's own (empty) locals: see createRequestLocals.
    const locals = createRequestLocals(policy(), requestId, startedAt);
    res.locals = locals;
    // Not set on `res` here: each response sends it with its own headers (the error renderer, the
    // catalogue, the proxied answer). A header set early puts every proxied answer on Node's slower
    // writeHead path, which re-validates each upstream header.
    // Read now: once the connection is gone the socket no longer knows its peer.
    const peer = peerAddress(req.socket);

    // `on`, not `once`: a response closes once, and `once` wraps each listener in two more objects.
    res.on('close', () => {
      const seconds = (performance.now() - locals.startedAt) / 1000;
      const route = locals.route?.id ?? UNMATCHED_ROUTE;
      // A response cut before its headers went out never reached the client with any status.
      const status = res.headersSent ? res.statusCode : 0;
      const code = locals.errorCode;
      countRequest(metrics, route, req.method, status, code);
      if (code === 'RATE_LIMITED') metrics.rateLimited.inc({ route });
      metrics.requestDuration.observe({ route }, seconds);
      const definition = code === undefined ? undefined : ERROR_CODES[code];
      if (locals.bodyBytes !== undefined) metrics.requestBodyBytes.observe({ route }, locals.bodyBytes);
      if (locals.upstreamMs !== undefined) metrics.upstreamDuration.observe({ route }, locals.upstreamMs / 1000);
      if (locals.upstreamErrorKind !== undefined) metrics.upstreamErrors.inc({ kind: locals.upstreamErrorKind });
      if (locals.upstreamStatus !== undefined) {
        metrics.upstreamStatusMapped.inc({ route, upstream_status: String(locals.upstreamStatus), status: String(status) });
      }
      const client = locals.clientAddress !== undefined ? locals.clientAddress : clientText(requestClient(peer, req.headers, trustedProxies));
      const path = loggedPath(req.url);
      const routeId = locals.route?.id ?? null;
      const keyId = locals.key?.id ?? null;
      const acquirerId = locals.key?.acquirerId ?? null;
      writeAccessLine(
        logger,
        locals.requestId,
        clientRequestId(clientId),
        req.method,
        path,
        routeId,
        status,
        decisionOf(definition, locals.upstreamStatus, res.writableFinished),
        code ?? null,
        acquirerId,
        keyId,
        client,
        Math.round(seconds * 1e6) / 1e3,
        locals.upstreamMs === undefined ? null : Math.round(locals.upstreamMs * 1e3) / 1e3,
        locals.upstreamStatus ?? null,
        res.writableFinished,
      );
      writeAuditLine(logger, { requestId: locals.requestId, method: req.method, path, route: routeId, status, keyId, acquirerId, client, bodyBytes: locals.bodyBytes ?? null });
      if (shadow !== undefined) judgeInShadow(shadow, req.method, req.url, locals, logger);
    });
    next();
  };
}

/** A fault of the shadow's is logged; it must never end the process from a `close` listener. */
function judgeInShadow(shadow: ShadowObserver, method: string, target: string, locals: Express.Locals, logger: Logger): void {
  try {
    shadow(method, target, locals);
  } catch (err) {
    logger.event('unexpected_error', { err, shadow: true });
  }
}

/**
 * What the access line says was decided. An upstream error status the gateway replaced is the
 * upstream's refusal, not an allow (a 404 for another acquirer's statement); a response that never
 * completed (client gone, upstream cut mid-body) is not an allow either.
 */
function decisionOf(definition: ErrorDefinition | undefined, upstreamStatus: number | undefined, completed: boolean): DenialReason | 'allowed' | 'aborted' {
  if (definition !== undefined) return definition.reason;
  if (upstreamStatus !== undefined) return 'upstream_status';
  return completed ? 'allowed' : 'aborted';
}
