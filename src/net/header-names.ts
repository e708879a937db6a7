/**
 * @module
 * Which header names may cross the gateway, in each direction: one list for every decision about a
 * header's name (the proxy's filters, and the policy's check of its identity header).
 */

/** Hop-by-hop headers (RFC 9110 §7.6.1) and their common non-standard relatives. */
export const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'proxy-authorization', 'proxy-authenticate',
]);

/**
 * The request headers that reach the upstream, and only these: a list of what to drop could never
 * name every header some framework reads as an identity, an address or a parameter. The gateway adds
 * Host, the acquirer header and X-Request-Id (and, when it signs, the two below). Each choice:
 * docs/request-handling.md, "Serve or proxy".
 */
export const FORWARDED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'accept', 'accept-encoding', 'accept-language', 'cache-control', 'if-match', 'if-none-match',
  'if-modified-since', 'if-unmodified-since', 'if-range', 'range', 'user-agent', 'traceparent',
  // A write's key for the upstream to recognise it sent again (by the client: the gateway never resends one).
  'idempotency-key',
]);

/**
 * Names an upstream request's exchange between the proxy and its pool, which takes it off as it
 * takes the request, before anything is written (proxy/upstream-agent.ts): the upstream never sees it.
 */
export const EXCHANGE_HEADER = 'x-acquirer-gateway-exchange';

/**
 * With ACQUIRER_SIGNING_SECRET, the gateway's signature over a forwarded request and the key id it
 * covers (proxy/acquirer-signature.ts; docs/security.md, "Verifying the acquirer header").
 */
export const ACQUIRER_SIGNATURE_HEADER = 'x-acquirer-signature';
export const ACQUIRER_KEY_ID_HEADER = 'x-acquirer-key-id';

/**
 * Request headers that claim what only a proxy in front of a service could know, or carry a credential:
 * the credential itself, claims about the client's address or the host and URL it asked for, method or
 * URL overrides. None is forwarded (only FORWARDED_REQUEST_HEADERS are); none may be the policy's
 * identity header either, in any spelling (neverForwarded, policy/compile.ts).
 */
export const NEVER_FORWARDED = new Set([
  // `expect`: the gateway already answered any expectation.
  'authorization', 'expect', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto',
  'x-forwarded-port', 'x-forwarded-prefix', 'x-forwarded-server', 'x-real-ip', 'x-client-ip',
  'client-ip', 'true-client-ip', 'x-cluster-client-ip', 'cf-connecting-ip', 'fastly-client-ip',
  'forwarded-for', 'x-originating-ip', 'x-remote-ip', 'x-remote-addr', 'x-proxyuser-ip',
  'x-host', 'x-original-url', 'x-rewrite-url', 'x-original-uri', 'x-script-name', 'x-url-scheme',
  'front-end-https', 'x-http-method-override', 'x-http-method', 'x-method-override',
  // Who the client is, as an authenticating proxy in front of a service would claim it.
  'remote-user', 'x-remote-user',
  // The API authenticates by key alone. A cookie could carry another identity (a session of the
  // legacy service's own dashboard) or parameters a framework merges with the query (PHP's
  // $_REQUEST, ASP.NET's Request[name]), past what the policy judged.
  'cookie',
  // CGI-style servers turn it into HTTP_PROXY, which HTTP clients read as their proxy ("httpoxy").
  'proxy',
  // Only the gateway signs: a client's copy is a forgery, and the policy may not name either.
  ACQUIRER_SIGNATURE_HEADER, ACQUIRER_KEY_ID_HEADER,
]);

/**
 * Families named by their folded prefix, whatever follows: every `X-Forwarded-…` (`-Ssl`, `-Scheme`,
 * `-Uri`, …) and `X-Original-…` (`-Host`, `-Method`, …) header claims something about the request
 * that only a proxy in front of the gateway could know; an Envoy between the gateway and the
 * upstream takes `X-Envoy-…` headers (retries, timeouts, the original path) from an internal caller,
 * which the gateway is.
 */
const NEVER_FORWARDED_FOLDED_PREFIXES = ['xforwarded', 'xoriginal', 'xenvoy'];

/**
 * The names that pass at all: letters, digits and hyphens, as nginx passes by default
 * (`underscores_in_headers off`, `ignore_invalid_headers on`). CGI-style servers read `X_Forwarded_For`
 * and `X.Forwarded.For` as `X-Forwarded-For`, and a header whose meaning depends on how the server
 * behind folds its name is one the gateway cannot judge.
 */
const PLAIN_NAME = /^[A-Za-z0-9-]+$/;

/** The longest text `memo` remembers: real header names and values are short. */
export const MEMO_MAX_TEXT = 128;

/**
 * Remembers a pure function's answers for the few distinct strings real traffic repeats (header
 * names, Connection values), so each is worked out once, not on every request. Bounded in count and
 * in size: when full it starts over, and a text longer than MEMO_MAX_TEXT is worked out each time, so
 * a client sending endless new values costs only the work it would cost anyway, and no memory it
 * chose (1024 remembered `Connection` values of 15 KB held 200 MiB).
 */
export function memo<T>(fn: (text: string) => T, max = 256): (text: string) => T {
  const seen = new Map<string, T>();
  return (text) => {
    if (text.length > MEMO_MAX_TEXT) return fn(text);
    let value = seen.get(text);
    if (value === undefined) {
      if (seen.size >= max) seen.clear();
      value = fn(text);
      seen.set(text, value);
    }
    return value;
  };
}

/** Lower case, and `_`, `.` and `-` removed: how lenient servers and CGI-style frameworks fold names. */
const foldName = memo((name: string) => name.replace(/[-_.]/g, '').toLowerCase());

const NEVER_FORWARDED_FOLDED = new Set([...HOP_BY_HOP, ...NEVER_FORWARDED].map(foldName));

/**
 * Whether a header name is one of those above, or could be read as one: any name but a plain one, and
 * the names compared folded (`XForwardedFor` too, for a lenient server that ignores separators).
 */
export const neverForwarded = memo((name: string): boolean => {
  if (!PLAIN_NAME.test(name)) return true;
  const folded = foldName(name);
  return NEVER_FORWARDED_FOLDED.has(folded) || NEVER_FORWARDED_FOLDED_PREFIXES.some((prefix) => folded.startsWith(prefix));
});

const NO_TOKENS: ReadonlySet<string> = new Set();
const parseTokens = memo((value: string): ReadonlySet<string> => {
  const tokens = new Set<string>();
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name !== '') tokens.add(name);
  }
  return tokens;
});

export function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> {
  if (value === undefined) return NO_TOKENS;
  return parseTokens(Array.isArray(value) ? value.join(',') : value);
}

/**
 * The response headers that reach the client, and only these: what a client uses of a JSON list or a
 * CSV download. Banners, `Via`, cookies and headers that would bind the gateway's own origin (HSTS,
 * CORS, CSP) stay behind; each choice: docs/request-handling.md, "Headers passed back".
 */
export const RETURNED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'content-type', 'content-length', 'content-encoding', 'content-language', 'content-disposition',
  'content-range', 'content-digest', 'repr-digest', 'digest', 'accept-ranges', 'etag', 'last-modified',
  'expires', 'age', 'cache-control', 'vary', 'date', 'location', 'content-location', 'link', 'refresh',
  'retry-after', 'deprecation', 'sunset',
]);

