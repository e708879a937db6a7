import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import { connectionTokens, memo, RETURNED_RESPONSE_HEADERS } from '../net/header-names.js';
import { percentDecode } from '../net/percent-decoding.js';
import { holdsSecret } from '../secrets/redact.js';

/**
 * `Cache-Control` as passed, kept from shared caches (RFC 9111 §3.5): every answer is one acquirer's,
 * and a CDN must not hand it to another asking for the same URL. `public`, `s-maxage` and
 * `proxy-revalidate` are dropped; `private` is added unless `private` or `no-store` is there.
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

/** The URL resolved against the upstream's origin, as a client resolves it: its path, query and fragment when it is on that origin, else null. */
function onUpstreamOrigin(location: string, upstreamOrigin: string): string | null {
  let url: URL;
  try {
    url = new URL(location, upstreamOrigin);
  } catch {
    return null;
  }
  // A path that begins `//` would name another host once relative.
  return url.origin === upstreamOrigin && !url.pathname.startsWith('//') ? url.pathname + url.search + url.hash : null;
}

/**
 * A URL on the upstream's own origin (compared as URLs), made relative, as nginx's `proxy_redirect
 * default` does: the client never learns the internal address. Any other URL is returned as it is
 * (namesUpstream judges it).
 */
function clientLocation(location: string, upstreamOrigin: string): string {
  if (!ABSOLUTE_OR_SCHEME_RELATIVE.test(location)) return location;
  return onUpstreamOrigin(location, upstreamOrigin) ?? location;
}
const ABSOLUTE_OR_SCHEME_RELATIVE = /^(?:[A-Za-z][A-Za-z0-9+.-]*:)?[/\\]{2}/;

/**
 * A 201's Location: the created resource is the upstream's own, so it is kept only on the upstream's
 * origin, made relative, as a client would resolve it (tabs and newlines dropped, `\\` a slash, another
 * scheme's `https:host`); anywhere else it is dropped.
 */
function createdLocation(location: string, upstreamOrigin: string): string | undefined {
  return onUpstreamOrigin(location, upstreamOrigin) ?? undefined;
}

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

/**
 * Whether a response header, as it would be passed, names the upstream's host, anywhere in it and with
 * any scheme, port or none: a URL that could not be made relative (another scheme or port, a Location's
 * `?next=`), a `Link` anchor, a `Content-Disposition` parameter, a header sent twice and joined by Node.
 * Searched in the percent-decoded text too (a login URL's `?service=http%3A%2F%2Fhost…`), as
 * redactSecrets searches for a key: a text encoded more often than percentDecode's rounds fails closed.
 */
function namesUpstream(text: string, host: RegExp): boolean {
  if (host.test(text)) return true;
  if (!text.includes('%')) return false;
  // Encoded past the decoder's rounds: what it hides cannot be judged, so it counts as naming it.
  const { text: decoded, complete } = percentDecode(text);
  return !complete || host.test(decoded);
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
 * Response headers passed back to the client: RETURNED_RESPONSE_HEADERS with our request id, URLs on
 * the upstream's origin made relative, Cache-Control private, Vary naming Authorization for the
 * acquirer header, and no length on a 204 or a redirect's dropped body (docs/request-handling.md).
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
    const rewrite = status === 201 && name === 'location' ? createdLocation : URL_HEADERS.get(name);
    let passed = rewrite === undefined ? value : rewrite(value, address.origin);
    if (passed === undefined) continue;
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

/**
 * Whether text the upstream wrote for a client (an error's explanation) names the upstream's host or
 * holds a secret, as a response header may not (buildClientHeaders).
 */
export function revealsUpstream(text: string, address: UpstreamAddress): boolean {
  return namesUpstream(text, address.host) || holdsSecret(text);
}
