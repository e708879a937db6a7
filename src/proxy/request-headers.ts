import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { connectionTokens, FORWARDED_REQUEST_HEADERS } from '../net/header-names.js';
import { holdsKey, holdsSecret } from '../secrets/redact.js';

/**
 * Forwarded headers whose values are tokens often random by design: the upstream's own validators
 * (entity tags, dates) sent back to it, and a write's idempotency key (32 random bytes in base64url
 * are a common choice). Dropping one silently would cost a retried write its protection.
 */
const TOKEN_HEADERS: ReadonlySet<string> = new Set(['if-match', 'if-none-match', 'if-range', 'idempotency-key']);

/**
 * A W3C Trace Context `traceparent` of version 00: hex ids, neither all zeros (an invalid one, which
 * W3C asks a receiver to ignore). Anything else is not passed on: the upstream starts a trace of its
 * own, as it would for a client that sent none. (A later version, unknown here, is not passed either.)
 */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The headers sent upstream for an allowed request: the client's of FORWARDED_REQUEST_HEADERS (a
 * hop-by-hop one named in its Connection excepted), plus the identity header set once from the key,
 * and the request id. Pure; `acquirerHeader` is lower case (the policy keeps it off the list).
 */
export function buildUpstreamHeaders(
  incoming: IncomingHttpHeaders,
  acquirerHeader: string,
  acquirerId: string,
  requestId: string,
): OutgoingHttpHeaders {
  const nominated = connectionTokens(incoming.connection);
  const outgoing: OutgoingHttpHeaders = {};
  for (const name of Object.keys(incoming)) {
    if (!FORWARDED_REQUEST_HEADERS.has(name) || nominated.has(name)) continue;
    const value = incoming[name];
    // A key (or its random part) pasted into another header never travels where Authorization does not.
    // In a token header a random part alone is the token's own shape: there, only a whole key or a URL's password.
    if (typeof value === 'string' && (TOKEN_HEADERS.has(name) ? holdsSecret(value) : holdsKey(value))) continue;
    if (name === 'traceparent' && !TRACEPARENT.test(value as string)) continue;
    outgoing[name] = value;
  }
  outgoing[acquirerHeader] = acquirerId;
  outgoing['x-request-id'] = requestId; // the one the gateway logged, whatever the client sent
  return outgoing;
}

