/**
 * @module
 * The access line: one per request, `"event":"request"`, with the same fields in the same order
 * whoever writes it (the app's observer, or the HTTP edge for requests refused before the app).
 */
import type { Logger } from './logger/logger.js';
import { holdsKey, redactKeysAndBodies } from '../secrets/redact.js';

/**
 * The request-target as an access line shows it: cut at 512 characters, and a key's random part on
 * its own replaced (a whole key, prefix and all, the logger redacts in every string).
 */
export function loggedPath(url: string): string {
  return redactKeysAndBodies(url.length > 512 ? url.slice(0, 512) + '…' : url);
}

const CLIENT_REQUEST_ID_MAX = 128;

/**
 * A client's own `X-Request-Id`, as the access line shows it beside the gateway's: at most 128
 * characters, each outside visible ASCII made `_`; null when there is none or it holds a key.
 */
export function clientRequestId(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string' || header === '' || holdsKey(header)) return null;
  return header.slice(0, CLIENT_REQUEST_ID_MAX).replace(/[^\x21-\x7e]/g, '_');
}

/**
 * Writes the access line. Its fields, in order (null for what was never known): the request id
 * (always the gateway's own), the client's X-Request-Id (clientRequestId), method, path (loggedPath), route id, status (0: none reached the client), decision, error code,
 * acquirer id, key id, client address as judged, duration and upstream time in ms (to the
 * microsecond), the upstream status the gateway replaced, whether the response completed. Taken as
 * arguments, not a record, so that the one record is built here, in this order.
 * 5xx and answers that never completed are written at `warn`, the rest at `info`.
 */
export function writeAccessLine(
  logger: Logger,
  requestId: string,
  clientId: string | null,
  method: string | null,
  path: string | null,
  route: string | null,
  status: number,
  decision: string,
  code: string | null,
  acquirerId: string | null,
  keyId: string | null,
  client: string | null,
  durationMs: number | null,
  upstreamMs: number | null,
  upstreamStatus: number | null,
  completed: boolean | null,
): void {
  const line = {
    event: 'request',
    request_id: requestId,
    client_request_id: clientId,
    method,
    path,
    route,
    status,
    decision,
    code,
    acquirer_id: acquirerId,
    key_id: keyId,
    client,
    duration_ms: durationMs,
    upstream_ms: upstreamMs,
    upstream_status: upstreamStatus,
    completed,
  };
  logger.flat(status >= 500 || completed === false ? 'warn' : 'info', line, 'request');
}

/** Methods that only read: every other request writes an audit line besides its access line. */
const READS = new Set(['GET', 'HEAD']);

export interface AuditFields {
  readonly requestId: string;
  readonly method: string | undefined;
  /** As the access line shows it (loggedPath), null when no request line was read. */
  readonly path: string | null;
  readonly route: string | null;
  readonly status: number;
  readonly keyId: string | null;
  readonly acquirerId: string | null;
  readonly client: string | null;
  /** The size of the body read whole and checked, passed or refused by the check; null when none was. */
  readonly bodyBytes: number | null;
}

/**
 * The audit line of a request whose method changes something, allowed or refused, wherever it was
 * answered: who (key, acquirer, client), what (method, path, route), the answer, and the body's size.
 * Never the body.
 */
export function writeAuditLine(logger: Logger, fields: AuditFields): void {
  if (fields.method === undefined || READS.has(fields.method)) return;
  logger.flatEvent('audit', {
    request_id: fields.requestId,
    method: fields.method,
    path: fields.path,
    route: fields.route,
    status: fields.status,
    key_id: fields.keyId,
    acquirer_id: fields.acquirerId,
    client: fields.client,
    body_bytes: fields.bodyBytes,
  });
}
