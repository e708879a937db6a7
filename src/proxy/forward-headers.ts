import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import { holdsKey, holdsSecret } from '../secrets/redact.js';

/** Hop-by-hop headers (RFC 9110 §7.6.1) and their common non-standard relatives. */
export const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade',
  'proxy-authorization', 'proxy-authenticate',
]);

/**
 * The request headers that reach the upstream, and only these: what a client of a read-only API needs
 * the upstream to see (content negotiation, conditional and range requests for the downloads, trace
 * context). The gateway adds Host (the upstream's), the acquirer header (from the key) and X-Request-Id.
 * A list of what to drop could never name every header some framework reads as a session, an identity,
 * an address or a parameter (X-Auth-Token, X-Client-Cert, WL-Proxy-Client-IP, Cookie …): none passes.
 * Every route takes no body today; one that did would need Content-Type and Content-Length here.
 * Trace context is `traceparent` alone, and only in its W3C form (TRACEPARENT): `tracestate` is
 * free-form vendor data a client writes (`tenant=acq_1` is well-formed), as baggage is.
 */
export const FORWARDED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'accept', 'accept-encoding', 'accept-language', 'cache-control', 'if-match', 'if-none-match',
  'if-modified-since', 'if-unmodified-since', 'if-range', 'range', 'user-agent', 'traceparent',
]);
/** Forwarded headers that hold the upstream's own validators (entity tags, dates), sent back to it. */
const VALIDATOR_HEADERS: ReadonlySet<string> = new Set(['if-match', 'if-none-match', 'if-range']);

/**
 * A W3C Trace Context `traceparent` of version 00: hex ids, neither all zeros (an invalid one, which
 * W3C asks a receiver to ignore). Anything else is not passed on: the upstream starts a trace of its
 * own, as it would for a client that sent none. (A later version, unknown here, is not passed either.)
 */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * Request headers that claim what only a proxy in front of a service could know, or carry a credential:
 * the credential itself, claims about the client's address or the host and URL it asked for, method or
 * URL overrides. None is forwarded (only FORWARDED_REQUEST_HEADERS are); none may be the policy's
 * identity header either, in any spelling (neverForwarded, policy/compile.ts).
 */
export const NEVER_FORWARDED = new Set([
  // `expect`: the gateway already answered any expectation; forwarded, it would also stop httpxy
  // from reporting the upstream request, which the timeout needs in order to cancel it.
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

function connectionTokens(value: string | string[] | undefined): ReadonlySet<string> {
  if (value === undefined) return NO_TOKENS;
  return parseTokens(Array.isArray(value) ? value.join(',') : value);
}

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
    // A validator is the upstream's own entity tag sent back, and a base64url digest (43 characters in
    // mixed case) is shaped like a random part alone: there, only a whole key or a URL's password.
    if (typeof value === 'string' && (VALIDATOR_HEADERS.has(name) ? holdsSecret(value) : holdsKey(value))) continue;
    if (name === 'traceparent' && !TRACEPARENT.test(value as string)) continue;
    outgoing[name] = value;
  }
  outgoing[acquirerHeader] = acquirerId;
  outgoing['x-request-id'] = requestId; // the one the gateway logged, whatever the client sent
  return outgoing;
}

/**
 * The response headers that reach the client, and only these: what a client of a read-only API of
 * JSON lists and CSV downloads uses (the representation and its integrity, validators and ranges,
 * caching, where a redirect points, when to retry). The rest is what an upstream says about itself
 * or would decide for the gateway's origin, and none of it passes: banners (`Server`, `X-Powered-By`,
 * `X-AspNet-Version`, `X-Backend-Server`), `Via` with the hosts inside (RFC 9110 §7.6.3 asks a portal
 * through a firewall not to forward their names), a cookie of the legacy service's session (a cookie
 * never goes back upstream: NEVER_FORWARDED), and `Strict-Transport-Security`, `Alt-Svc`, CORS or CSP
 * headers, which clients would apply to the gateway's own origin and which are its operator's to set.
 * A list of what to drop could never name them all, as on the request side (FORWARDED_REQUEST_HEADERS).
 */
export const RETURNED_RESPONSE_HEADERS: ReadonlySet<string> = new Set([
  'content-type', 'content-length', 'content-encoding', 'content-language', 'content-disposition',
  'content-range', 'content-digest', 'repr-digest', 'digest', 'accept-ranges', 'etag', 'last-modified',
  'expires', 'age', 'cache-control', 'vary', 'date', 'location', 'content-location', 'link', 'refresh',
  'retry-after', 'deprecation', 'sunset',
]);

/**
 * `Cache-Control` as passed: every answer is one acquirer's, to a request with `Authorization`, and a
 * shared cache in front of the gateway (a CDN, a caching load balancer) must not store it, or it could
 * hand one acquirer's statement to another asking for the same URL (`by_date/<date>.csv`). RFC 9111
 * §3.5 keeps shared caches from storing such answers unless they say `public`, `s-maxage` or
 * `must-revalidate`: `public`, `s-maxage` and `proxy-revalidate` (for shared caches only) are dropped,
 * and `private` is added unless `private` or `no-store` is there. A qualified `private="…"` lets a
 * shared cache store the answer without the fields it names: it becomes a plain `private`.
 */
export const privateCacheControl = memo((value: string): string => {
  const members = directives(value);
  // A quoted string left open: where its directives end cannot be told, so nothing is kept of them.
  if (members === null) return 'private, no-store';
  const kept: string[] = [];
  let unshared = false;
  for (const directive of members) {
    const name = directive.split('=', 1)[0]!.trim().toLowerCase();
    if (name === 'public' || name === 's-maxage' || name === 'proxy-revalidate') continue;
    if (name === 'private') {
      if (!kept.includes('private')) kept.push('private');
      unshared = true;
      continue;
    }
    if (name === 'no-store') unshared = true;
    kept.push(directive);
  }
  if (!unshared) kept.unshift('private');
  return kept.join(', ');
});

/**
 * Cache-Control's directives, trimmed, empty ones dropped: split at the commas outside quoted strings
 * (`no-cache="a, b"` is one directive). A quoted string is a directive's value: it opens only right
 * after `=`, and a backslash inside one escapes the character after it. Null when one is left open.
 */
function directives(value: string): string[] | null {
  const members: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"' && value[i - 1] === '=') quoted = true;
    else if (c === ',') {
      members.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (quoted) return null;
  members.push(value.slice(start).trim());
  return members.filter((m) => m !== '');
}

/**
 * `Vary` as passed: the acquirer header is the upstream's, set by the gateway from the key, and
 * unknown to the client; to the client the answer varies with `Authorization`, which it does send.
 */
const clientVary = memo((pair: string): string => {
  const [value, acquirerHeader] = pair.split('\n') as [string, string];
  const names: string[] = [];
  for (const part of value.split(',')) {
    let name = part.trim();
    if (name === '') continue;
    if (name.toLowerCase() === acquirerHeader) name = 'Authorization';
    if (!names.some((n) => n.toLowerCase() === name.toLowerCase())) names.push(name);
  }
  return names.join(', ');
});

/**
 * The upstream as its answers are searched for it: its origin, on which URLs are made relative, and
 * its host name, which no header passed to a client may hold. Worked out once per proxy.
 */
export interface UpstreamAddress {
  /** A URL's `origin`: lower case, no default port. */
  readonly origin: string;
  /** The host name as a whole name, in any case: not inside another (`legacy-files`, `x.legacy`, `10.0.0.50`). */
  readonly host: RegExp;
}

export function upstreamAddress(url: string | URL): UpstreamAddress {
  const parsed = new URL(url);
  // An IPv6 address is searched for without its brackets: `::1` as written in a URL and in prose.
  const name = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const literal = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const bounds = HOST_BOUNDS[isIP(name)]!;
  return { origin: parsed.origin, host: new RegExp(`(?<!${bounds.before})${literal}(?!${bounds.after})`, 'i') };
}

/**
 * What may not come right before and after the upstream's host for a match, by `isIP`: a name is a
 * whole name, not inside another (`legacy-files`, `old.legacy`), and a trailing dot (`legacy.`) is the
 * same name. An address is one wherever it stands between other characters (`from-10.0.0.5.csv`,
 * `10.0.0.5.nip.io` both show it), unless it is part of a longer number (`110.0.0.5`, `10.0.0.50`,
 * `fd00::50`).
 */
const HOST_BOUNDS: Readonly<Record<number, { readonly before: string; readonly after: string }>> = {
  0: { before: '[A-Za-z0-9_.-]', after: '[A-Za-z0-9_-]|\\.[A-Za-z0-9_-]' },
  4: { before: '[0-9]|[0-9]\\.', after: '[0-9]|\\.[0-9]' },
  6: { before: '[0-9A-Fa-f:]', after: '[0-9A-Fa-f:]|\\.[0-9]' },
};

/**
 * A URL on the upstream's own origin, made relative (`/path?query#fragment`): the client resolves it
 * against the gateway it asked, as nginx's `proxy_redirect default` does, and never learns the
 * internal address. Compared as URLs, so a scheme-relative form, an explicit default port or user
 * information is the same origin. A URL anywhere else (a storage URL, another site), or one whose
 * path would make it another host's once relative (`//evil.example/…`), is returned as it is (and
 * then not passed if it names the upstream: namesUpstream).
 */
function clientLocation(location: string, upstreamOrigin: string): string {
  if (!ABSOLUTE_OR_SCHEME_RELATIVE.test(location)) return location;
  let url: URL;
  try {
    url = new URL(location, upstreamOrigin);
  } catch {
    return location;
  }
  if (url.origin !== upstreamOrigin || url.pathname.startsWith('//')) return location;
  return url.pathname + url.search + url.hash;
}
const ABSOLUTE_OR_SCHEME_RELATIVE = /^(?:[A-Za-z][A-Za-z0-9+.-]*:)?[/\\]{2}/;

/** `Refresh: 5; url=…` (HTML's pragma, honoured as a header by browsers), its URL made as clientLocation makes it. */
function clientRefresh(refresh: string, upstreamOrigin: string): string {
  const parts = /^(\s*[0-9.]+\s*[;,]\s*(?:url\s*=\s*)?['"]?)([^'"\s]*)(.*)$/is.exec(refresh);
  return parts === null ? refresh : parts[1]! + clientLocation(parts[2]!, upstreamOrigin) + parts[3]!;
}

/** `Link: <…>; rel="next", <…>; rel="prev"`: each target made as clientLocation makes it. */
function clientLink(link: string, upstreamOrigin: string): string {
  return link.replace(/<([^>]*)>/g, (_, target: string) => `<${clientLocation(target, upstreamOrigin)}>`);
}

/** Response headers that carry URLs, each with the part that is one, rewritten by clientLocation. */
const URL_HEADERS: ReadonlyMap<string, (value: string, upstreamOrigin: string) => string> = new Map([
  ['location', clientLocation],
  ['content-location', clientLocation],
  ['refresh', clientRefresh],
  ['link', clientLink],
]);

/** Percent-encoding undone, up to four layers deep (`%252F`); what is not a valid escape stays. */
function percentDecoded(text: string): string {
  let decoded = text;
  for (let layer = 0; layer < 4 && decoded.includes('%'); layer++) {
    const next = decoded.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === decoded) break;
    decoded = next;
  }
  return decoded;
}

/**
 * Whether a response header, as it would be passed, names the upstream's host, anywhere in it and with
 * any scheme, port or none: a URL that could not be made relative (another scheme or port, a Location's
 * `?next=`), a `Link` anchor, a `Content-Disposition` parameter, a header sent twice and joined by Node.
 * Searched in the percent-decoded text too (a login URL's `?service=http%3A%2F%2Fhost…`).
 */
function namesUpstream(text: string, host: RegExp): boolean {
  return host.test(text) || (text.includes('%') && host.test(percentDecoded(text)));
}

/**
 * A redirect's body is not passed on. It is for a human who did not follow the redirect, and it
 * repeats the Location as it was written, absolute on the upstream's origin when the upstream builds
 * it from the Host it was sent (Rails' `redirect_to` does). Its own headers go with it. Nor is a 205's:
 * it has none (RFC 9110 §15.3.6), and a client may read it so, whatever its Content-Length says.
 */
export function hasDroppedBody(status: number): boolean {
  return (status >= 300 && status < 400 && status !== 304) || status === 205;
}
const DROPPED_BODY_HEADERS = new Set(['content-length', 'content-type', 'content-encoding']);

/**
 * Response headers passed back to the client: the upstream's of RETURNED_RESPONSE_HEADERS (one named
 * in its Connection excepted), with our request id, URLs on the upstream's origin made relative
 * (URL_HEADERS), `Cache-Control` kept from shared caches (privateCacheControl) and `Vary` naming
 * `Authorization` where it named the acquirer header (`acquirerHeader`, lower case). A 204 has no
 * body and must not claim a length (RFC 9110 §8.6): an upstream's Content-Length on one is dropped,
 * or a client that trusted it would wait for bytes that never come. A redirect's body is dropped
 * (hasDroppedBody): `Content-Length: 0`. No header that names the upstream's host is passed.
 */
export function buildClientHeaders(
  status: number,
  upstream: IncomingHttpHeaders,
  requestId: string,
  address: UpstreamAddress,
  acquirerHeader: string,
): OutgoingHttpHeaders {
  const nominated = connectionTokens(upstream.connection);
  const withoutBody = hasDroppedBody(status);
  const outgoing: OutgoingHttpHeaders = {};
  for (const name of Object.keys(upstream)) {
    if (!RETURNED_RESPONSE_HEADERS.has(name) || nominated.has(name) || (status === 204 && name === 'content-length')) continue;
    if (withoutBody && DROPPED_BODY_HEADERS.has(name)) continue;
    const value = upstream[name];
    if (typeof value !== 'string') continue; // only Set-Cookie comes as a list, and it is not passed
    const rewrite = URL_HEADERS.get(name);
    let passed = rewrite === undefined ? value : rewrite(value, address.origin);
    if (name === 'cache-control') passed = privateCacheControl(passed);
    else if (name === 'vary') passed = clientVary(`${passed}\n${acquirerHeader}`);
    // Nor does the upstream hand a key on to the client (echoed from a query, say). A random part
    // alone is not looked for here: the upstream is never sent one (no header that holds one, and no
    // path or query but as the policy types them), while ETags (a base64url SHA-256 is 43 characters
    // in mixed case) and file names in Content-Disposition are often shaped like one.
    if (passed === '' || namesUpstream(passed, address.host) || holdsSecret(passed)) continue;
    outgoing[name] = passed;
  }
  if (withoutBody) outgoing['content-length'] = '0';
  outgoing['x-request-id'] = requestId;
  return outgoing;
}

/** An unsatisfied range's `Content-Range`, as RFC 9110 §14.4 spells it: `bytes`, a space, an asterisk, a slash and the length. */
const UNSATISFIED_RANGE = /^bytes \*\/\d{1,20}$/;

/**
 * The one upstream header an error answer keeps: a 416's `Content-Range`, which tells the client the
 * representation's length so it can ask for a range that exists. Anything else in it is dropped.
 */
export function unsatisfiedRange(upstream: IncomingHttpHeaders): string | undefined {
  const value = upstream['content-range'];
  return value !== undefined && UNSATISFIED_RANGE.test(value) ? value : undefined;
}
