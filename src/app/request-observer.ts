import { randomUUID } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { ERROR_CODES, type DenialReason, type ErrorDefinition } from '../errors/codes.js';
import type { Logger } from '../observability/logger/logger.js';
import { addressText, peerAddress, resolveClientAddress } from '../net/client-address.js';
import type { IpAddress, IpAllowlist } from '../net/ip-allowlist.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { holdsKey, redactKeysAndBodies } from '../secrets/redact.js';
import { createRequestLocals } from './request-context.js';
import { methodLabel, UNMATCHED_ROUTE } from '../observability/metrics/labels.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';

/**
 * The request-target as an access line shows it: cut at 512 characters, and a key's random part on
 * its own replaced (a whole key, prefix and all, the logger redacts in every string).
 */
export function loggedPath(url: string): string {
  return redactKeysAndBodies(url.length > 512 ? url.slice(0, 512) + '…' : url);
}

/** An incoming request id is kept only if it is short and plain: it goes into logs and upstream. */
const VALID_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export interface RequestObserverDeps {
  readonly policy: () => CompiledPolicy;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly trustedProxies: IpAllowlist | null;
}

function clientAddress(res: Response, req: Parameters<RequestHandler>[0], peer: IpAddress | null, trusted: IpAllowlist | null): string | null {
  if (res.locals.clientAddress !== undefined) return res.locals.clientAddress;
  const forwardedFor = req.headers['x-forwarded-for'];
  const address = resolveClientAddress(peer, typeof forwardedFor === 'string' ? forwardedFor : undefined, trusted);
  return address === null ? null : addressText(address);
}

/**
 * The first middleware: fixes the policy the request is judged by, gives it a request id, and when
 * the response is over records its metrics and writes its one access log line.
 */
export function createRequestObserver({ policy, metrics, logger, trustedProxies }: RequestObserverDeps): RequestHandler {
  // Taken once: the logger is pino's, a hash table to V8, where each look costs a generic property load.
  const writeAccessLine = logger.flat;
  return function requestObserver(req, res, next) {
    const startedAt = performance.now(); // a number: hrtime.bigint() allocates a BigInt per call
    const incoming = req.headers['x-request-id'];
    // One that holds a key (a client's own, pasted into the wrong header) is replaced: kept, it would
    // go upstream and come back, where the Authorization header never goes.
    const requestId = typeof incoming === 'string' && VALID_REQUEST_ID.test(incoming) && !holdsKey(incoming) ? incoming : randomUUID();
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
      metrics.requests.inc({ route, method: methodLabel(req.method), status: String(status) });
      metrics.requestDuration.observe({ route }, seconds);
      const code = locals.errorCode;
      const definition = code === undefined ? undefined : ERROR_CODES[code];
      if (definition !== undefined && definition.status < 500) metrics.denials.inc({ reason: definition.reason });
      if (locals.upstreamMs !== undefined) metrics.upstreamDuration.observe({ route }, locals.upstreamMs / 1000);
      if (locals.upstreamErrorKind !== undefined) metrics.upstreamErrors.inc({ kind: locals.upstreamErrorKind });
      if (locals.upstreamStatus !== undefined) {
        metrics.upstreamStatusMapped.inc({ route, upstream_status: String(locals.upstreamStatus), status: String(status) });
      }
      const line = {
        request_id: locals.requestId,
        method: req.method,
        path: loggedPath(req.url),
        route: locals.route?.id ?? null,
        status,
        decision: decisionOf(definition, locals.upstreamStatus, res.writableFinished),
        code: code ?? null,
        acquirer_id: locals.key?.acquirerId ?? null,
        key_id: locals.key?.id ?? null,
        client: clientAddress(res, req, peer, trustedProxies),
        duration_ms: Math.round(seconds * 1e6) / 1e3,
        upstream_ms: locals.upstreamMs === undefined ? null : Math.round(locals.upstreamMs * 1e3) / 1e3,
        upstream_status: locals.upstreamStatus ?? null,
        completed: res.writableFinished,
      };
      writeAccessLine(status >= 500 || !res.writableFinished ? 'warn' : 'info', line, 'request');
    });
    next();
  };
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
