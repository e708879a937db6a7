/**
 * The one error table. Every response the gateway itself produces for a failure comes from here:
 * a stable code (for logs and metrics) maps to an HTTP status, and a status maps to exactly one body.
 * Bodies are keyed by status, not by code, so that "does not exist" and "belongs to another acquirer"
 * cannot differ by a single byte. The table in docs/api.md is checked against this file by a test.
 */

/**
 * Public message for each status the gateway can answer with. 406, 412 and 416 only ever answer for
 * the upstream: they are its refusals of headers the gateway forwards (`Accept`, `If-Match` and
 * `If-Unmodified-Since`, `Range`), which a client needs as they are, not as a 502.
 */
export const STATUS_MESSAGES = {
  400: 'Bad request',
  401: 'Invalid authentication information',
  403: 'Unauthorized',
  404: 'Not found',
  406: 'Not acceptable',
  408: 'Request timeout',
  412: 'Precondition failed',
  413: 'Payload too large',
  415: 'Unsupported media type',
  416: 'Range not satisfiable',
  422: 'Unprocessable entity',
  429: 'Too many requests',
  431: 'Request header fields too large',
  500: 'Internal server error',
  502: 'Bad gateway',
  503: 'Service unavailable',
  504: 'Gateway timeout',
} as const;

export type ErrorStatus = keyof typeof STATUS_MESSAGES;

/** Why a request was refused; used as a metric label, so the set is closed and small. */
export type DenialReason =
  | 'missing_key'
  | 'invalid_key'
  | 'disabled_key'
  | 'ip_not_allowed'
  | 'permission_denied'
  | 'not_found'
  | 'non_canonical_path'
  | 'bad_request'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'malformed_body'
  | 'tenant_field'
  | 'request_timeout'
  | 'too_many_in_flight'
  | 'rate_limited'
  | 'rate_limit_unavailable'
  | 'key_store_unavailable'
  | 'upstream_status'
  | 'upstream_unreachable'
  | 'upstream_timeout'
  | 'internal';

export interface ErrorDefinition {
  readonly status: ErrorStatus;
  readonly reason: DenialReason;
  /** One line for operators; never sent to clients. */
  readonly description: string;
}

export const ERROR_CODES = {
  API_KEY_MISSING: {
    status: 401,
    reason: 'missing_key',
    description: 'No Authorization header, or a scheme other than Bearer.',
  },
  API_KEY_MALFORMED: {
    status: 401,
    reason: 'invalid_key',
    description: 'The bearer token is not of the acquirer key form.',
  },
  API_KEY_UNKNOWN: {
    status: 401,
    reason: 'invalid_key',
    description: 'No key with this value exists.',
  },
  API_KEY_DISABLED: {
    status: 401,
    reason: 'disabled_key',
    description: 'The key was disabled (permanently).',
  },
  IP_NOT_ALLOWED: {
    status: 401,
    reason: 'ip_not_allowed',
    description: "The client address is outside the key's IP whitelist.",
  },
  ROUTE_NOT_FOUND: {
    status: 404,
    reason: 'not_found',
    description: 'The policy declares no route for this method and path.',
  },
  NON_CANONICAL_PATH: {
    status: 404,
    reason: 'non_canonical_path',
    description: 'The request-target is not in canonical form; it is never forwarded.',
  },
  PERMISSION_DENIED: {
    status: 403,
    reason: 'permission_denied',
    description: 'The key lacks a permission the route requires.',
  },
  BAD_REQUEST: {
    status: 400,
    reason: 'bad_request',
    description: 'The request cannot be judged safely (duplicate Authorization, a body on a route that takes none, a transfer coding other than chunked), or Node\'s HTTP parser rejected it.',
  },
  QUERY_NOT_ALLOWED: {
    status: 400,
    reason: 'bad_request',
    description: 'The route declares the query parameters it takes, and this query has another, one twice, or a value not of its type.',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    reason: 'unsupported_media_type',
    description: "The route takes a body, and the request's Content-Type is none of the route's media types, is missing, has a parameter other than charset=utf-8, or is given twice.",
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    reason: 'payload_too_large',
    description: "The body is longer than the route's max_bytes (a Content-Length over it is refused unread); the connection is closed.",
  },
  MALFORMED_BODY: {
    status: 400,
    reason: 'malformed_body',
    description: 'The body is not one well-formed JSON value in UTF-8: a byte-order mark, nesting deeper than 32, half a surrogate pair, or an object with a name twice.',
  },
  TENANT_FIELD: {
    status: 400,
    reason: 'tenant_field',
    description: "The body has a member named as one of the policy's tenant_fields, at some depth: only the acquirer header names the tenant.",
  },
  REQUEST_TIMEOUT: {
    status: 408,
    reason: 'request_timeout',
    description: 'The body had not all arrived within REQUEST_TIMEOUT_MS of the request; the connection is closed.',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    reason: 'bad_request',
    description: 'The request head is larger than Node\'s limit (16 KiB by default), or has more than 100 header lines.',
  },
  ACQUIRER_BUSY: {
    status: 429,
    reason: 'too_many_in_flight',
    description: 'The acquirer already has ACQUIRER_MAX_IN_FLIGHT requests under way in this process (a body being read, or proxied); sent with Retry-After: 1.',
  },
  RATE_LIMITED: {
    status: 429,
    reason: 'rate_limited',
    description: "The key has used its route's rate (the policy's rate_limits); sent with Retry-After and the RateLimit and RateLimit-Policy headers.",
  },
  RATE_LIMIT_UNAVAILABLE: {
    status: 503,
    reason: 'rate_limit_unavailable',
    description: 'RATE_LIMIT_STORE=redis with RATE_LIMIT_FAIL=closed, and Redis did not answer the rate limit in time.',
  },
  KEY_STORE_UNAVAILABLE: {
    status: 503,
    reason: 'key_store_unavailable',
    description: 'The key is not cached and Redis did not answer in time.',
  },
  UPSTREAM_UNREACHABLE: {
    status: 502,
    reason: 'upstream_unreachable',
    description: 'The upstream refused, reset or could not be reached.',
  },
  UPSTREAM_TIMEOUT: {
    status: 504,
    reason: 'upstream_timeout',
    description: 'The upstream did not start answering within UPSTREAM_TIMEOUT_MS.',
  },
  INTERNAL: {
    status: 500,
    reason: 'internal',
    description: 'A fault in the gateway itself; details go to the log only.',
  },
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorStatus(status: number): status is ErrorStatus {
  return Object.hasOwn(STATUS_MESSAGES, status);
}
