import net from 'node:net';
import { FORWARDED_REQUEST_HEADERS } from '../../src/net/header-names.js';
import { createKey, runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { parseRawResponse } from '../helpers/raw.js';
import { STATEMENT_ID } from '../helpers/policy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { rawHeaderValues, startRecordingUpstream } from './recording-upstream.js';

/**
 * Hostile requests written as raw bytes (most cannot be produced by an HTTP client library, which
 * would normalise them), each with its expected safe outcome, against the real gateway and an
 * upstream that records the exact bytes it receives. Every case asserts the status, the body bytes
 * and what the upstream received: nothing, or exactly one request with the expected target, exactly
 * one acquirer header with the key's acquirer, and no credential.
 */
type Keys = Record<'acq1' | 'acq2' | 'listOnly' | 'readOnly' | 'whitelisted' | 'disabled', string>;

interface HostileCase {
  readonly name: string;
  readonly request: (k: Keys) => string;
  /** Local address to send from: 127.0.0.2 is a trusted proxy for this gateway. */
  readonly from?: string;
  readonly status: number;
  /** A HEAD request: the response has headers only. */
  readonly head?: boolean;
  /** null: the upstream must receive nothing. */
  readonly upstream: null | { readonly target: string; readonly acquirer: 'acq_1' | 'acq_2'; readonly method?: string; readonly body?: string };
}

const LIST = '/v1/acquirer/eod_statements';
const CSV = `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`;
const BODIES: Record<number, string> = {
  400: '{"message":"Bad request"}',
  401: '{"message":"Invalid authentication information"}',
  403: '{"message":"Unauthorized"}',
  404: '{"message":"Not found"}',
  413: '{"message":"Payload too large"}',
  415: '{"message":"Unsupported media type"}',
  431: '{"message":"Request header fields too large"}',
  200: '{"upstream":1}',
};

/** A request head: request line, Host, then the given header lines. */
const req = (line: string, ...headers: string[]) => `${line}\r\nHost: gateway\r\n${headers.map((h) => h + '\r\n').join('')}\r\n`;
const get = (target: string, ...headers: string[]) => req(`GET ${target} HTTP/1.1`, ...headers);
const auth = (key: string) => `Authorization: Bearer ${key}`;
const ok = (target: string, acquirer: 'acq_1' | 'acq_2' = 'acq_1') => ({ status: 200, upstream: { target, acquirer } }) as const;
const refused = (status: number) => ({ status, upstream: null }) as const;
const USERS = '/v1/acquirer/merchants/m1/users';
const post = (target: string, body: string, ...headers: string[]) => req(`POST ${target} HTTP/1.1`, ...headers) + body;
const json = (body: string) => [`Content-Type: application/json`, `Content-Length: ${Buffer.byteLength(body, 'latin1')}`];
const created = (body: string) => ({ status: 200, upstream: { target: USERS, acquirer: 'acq_1', method: 'POST', body } }) as const;
const USER = '{"name":"Ada","email":"ada@example.com"}';

const GROUPS: Record<string, HostileCase[]> = {
  'bearer parsing': [
    { name: 'no Authorization', request: () => get(LIST), ...refused(401) },
    { name: 'empty Authorization', request: () => get(LIST, 'Authorization: '), ...refused(401) },
    { name: 'scheme only', request: () => get(LIST, 'Authorization: Bearer'), ...refused(401) },
    { name: 'scheme and spaces', request: () => get(LIST, 'Authorization: Bearer    '), ...refused(401) },
    { name: 'lower-case scheme', request: (k) => get(LIST, `Authorization: bearer ${k.acq1}`), ...ok(LIST) },
    { name: 'upper-case scheme', request: (k) => get(LIST, `Authorization: BEARER ${k.acq1}`), ...ok(LIST) },
    { name: 'tab between scheme and key', request: (k) => get(LIST, `Authorization: Bearer\t${k.acq1}`), ...refused(401) },
    { name: 'Basic scheme with the key', request: (k) => get(LIST, `Authorization: Basic ${k.acq1}`), ...refused(401) },
    { name: 'key followed by junk', request: (k) => get(LIST, `Authorization: Bearer ${k.acq1} junk`), ...refused(401) },
    { name: 'two keys, comma', request: (k) => get(LIST, `Authorization: Bearer ${k.acq1},${k.acq2}`), ...refused(401) },
    { name: 'duplicate Authorization, same key', request: (k) => get(LIST, auth(k.acq1), auth(k.acq1)), ...refused(400) },
    { name: 'duplicate Authorization, valid then invalid', request: (k) => get(LIST, auth(k.acq1), 'Authorization: Bearer nope'), ...refused(400) },
    { name: 'duplicate Authorization, invalid then valid', request: (k) => get(LIST, 'Authorization: Basic x', auth(k.acq2)), ...refused(400) },
    { name: 'the spec example prefix', request: () => get(LIST, `Authorization: Bearer acquirer_api_key_${'A'.repeat(43)}`), ...refused(401) },
    { name: 'a short key', request: () => get(LIST, `Authorization: Bearer acquirer_key_${'A'.repeat(20)}`), ...refused(401) },
    { name: 'a key with +/ (not base64url)', request: () => get(LIST, `Authorization: Bearer acquirer_key_${'A+/'.repeat(15)}`), ...refused(401) },
    { name: 'an unknown well-formed key', request: () => get(LIST, auth(`acquirer_key_${'Z'.repeat(43)}`)), ...refused(401) },
    { name: 'a disabled key', request: (k) => get(LIST, auth(k.disabled)), ...refused(401) },
    { name: 'a key used from outside its whitelist', request: (k) => get(LIST, auth(k.whitelisted)), ...refused(401) },
    { name: 'Proxy-Authorization instead', request: (k) => get(LIST, `Proxy-Authorization: Bearer ${k.acq1}`), ...refused(401) },
    { name: 'key in the query string', request: (k) => get(`${LIST}?access_token=${k.acq1}`), ...refused(401) },
    { name: 'NUL in the key', request: (k) => get(LIST, `Authorization: Bearer ${k.acq1}\u0000`), ...refused(400) },
  ],
  'path canonicalisation': [
    { name: 'the list, plain', request: (k) => get(LIST, auth(k.acq1)), ...ok(LIST) },
    { name: 'a declared query passed unchanged', request: (k) => get(`${LIST}?page=2`, auth(k.acq1)), ...ok(`${LIST}?page=2`) },
    { name: 'an undeclared query parameter', request: (k) => get(`${LIST}?page=2&sort=-date&q=a%20b`, auth(k.acq1)), ...refused(400) },
    { name: 'a declared parameter twice', request: (k) => get(`${LIST}?page=1&page=2`, auth(k.acq1)), ...refused(400) },
    // Judged as the upstream reads it (`page`), forwarded as sent.
    { name: 'a declared parameter, percent-encoded', request: (k) => get(`${LIST}?p%61ge=2`, auth(k.acq1)), ...ok(`${LIST}?p%61ge=2`) },
    { name: 'a declared parameter twice, once percent-encoded', request: (k) => get(`${LIST}?page=1&p%61ge=2`, auth(k.acq1)), ...refused(400) },
    { name: 'an undeclared parameter, percent-encoded', request: (k) => get(`${LIST}?acquirer%5Fid=acq_2`, auth(k.acq1)), ...refused(400) },
    { name: 'a query on a download', request: (k) => get(`${CSV}?page=1`, auth(k.acq1)), ...refused(400) },
    { name: 'empty query', request: (k) => get(`${LIST}?`, auth(k.acq1)), ...ok(`${LIST}?`) },
    { name: 'the download, plain', request: (k) => get(CSV, auth(k.acq1)), ...ok(CSV) },
    { name: 'by date, plain', request: (k) => get('/v1/acquirer/eod_statements/by_date/2024-02-29.csv', auth(k.acq1)), ...ok('/v1/acquirer/eod_statements/by_date/2024-02-29.csv') },
    { name: 'dot segment', request: (k) => get('/v1/acquirer/./eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'parent segment', request: (k) => get('/v1/acquirer/x/../eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'parent segment at the end', request: (k) => get(`${LIST}/${STATEMENT_ID}.csv/..`, auth(k.acq1)), ...refused(404) },
    { name: 'encoded dots', request: (k) => get('/v1/acquirer/x/%2e%2e/eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'upper-case encoded dots', request: (k) => get('/v1/acquirer/x/%2E%2E/eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'double-encoded dots', request: (k) => get('/v1/acquirer/x/%252e%252e/eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'encoded slash', request: (k) => get('/v1/acquirer%2Feod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'encoded backslash', request: (k) => get('/v1/acquirer%5Ceod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'encoded unreserved character', request: (k) => get('/v1/acquirer/eod%5Fstatements', auth(k.acq1)), ...refused(404) },
    { name: 'encoded NUL', request: (k) => get(`${LIST}%00`, auth(k.acq1)), ...refused(404) },
    { name: 'backslashes', request: (k) => get('/v1\\acquirer\\eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'empty segment', request: (k) => get('/v1/acquirer//eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'leading double slash', request: (k) => get('//v1/acquirer/eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'trailing slash', request: (k) => get(`${LIST}/`, auth(k.acq1)), ...refused(404) },
    { name: 'path parameter', request: (k) => get(`${LIST};jsessionid=1`, auth(k.acq1)), ...refused(404) },
    { name: 'path parameter in a segment', request: (k) => get('/v1/acquirer;x=1/eod_statements', auth(k.acq1)), ...refused(404) },
    { name: 'fragment', request: (k) => get(`${LIST}#x`, auth(k.acq1)), ...refused(404) },
    { name: 'fragment in the query', request: (k) => get(`${LIST}?a=1#x`, auth(k.acq1)), ...refused(404) },
    { name: 'absolute-form target', request: (k) => get(`http://upstream${LIST}`, auth(k.acq1)), ...refused(404) },
    { name: 'absolute-form target, https', request: (k) => get(`https://gateway${LIST}`, auth(k.acq1)), ...refused(404) },
    { name: 'asterisk-form target', request: (k) => req('GET * HTTP/1.1', auth(k.acq1)), ...refused(404) },
    { name: 'upper-case path', request: (k) => get('/V1/ACQUIRER/EOD_STATEMENTS', auth(k.acq1)), ...refused(404) },
    { name: 'upper-case statement id', request: (k) => get(CSV.toUpperCase().replace('/V1/ACQUIRER/EOD_STATEMENTS', LIST).replace('.CSV', '.csv'), auth(k.acq1)), ...refused(404) },
    { name: 'upper-case extension', request: (k) => get(CSV.replace('.csv', '.CSV'), auth(k.acq1)), ...refused(404) },
    { name: 'statement id without extension', request: (k) => get(`${LIST}/${STATEMENT_ID}`, auth(k.acq1)), ...refused(404) },
    { name: 'not a UUID', request: (k) => get(`${LIST}/../admin.csv`, auth(k.acq1)), ...refused(404) },
    { name: 'impossible date', request: (k) => get('/v1/acquirer/eod_statements/by_date/2023-02-29.csv', auth(k.acq1)), ...refused(404) },
    { name: 'non-ASCII bytes in the path', request: (k) => get(`${LIST}\u00e9`, auth(k.acq1)), ...refused(400) },
    { name: 'fullwidth dot (raw UTF-8)', request: (k) => get(`/v1/acquirer/\u00ef\u00bc\u008e\u00ef\u00bc\u008e/eod_statements`, auth(k.acq1)), ...refused(400) },
    { name: 'unknown path', request: (k) => get('/v1/acquirer/unknown_things', auth(k.acq1)), ...refused(404) },
    { name: 'root', request: (k) => get('/', auth(k.acq1)), ...refused(404) },
    { name: 'admin path on the public port', request: (k) => get('/metrics', auth(k.acq1)), ...refused(404) },
  ],
  'object-level authorisation across acquirers': [
    { name: 'acq_2 lists: upstream sees acq_2', request: (k) => get(LIST, auth(k.acq2)), ...ok(LIST, 'acq_2') },
    { name: 'acq_2 claims acq_1 by header', request: (k) => get(LIST, auth(k.acq2), 'X-Acquirer-Id: acq_1'), ...ok(LIST, 'acq_2') },
    { name: 'acq_2 downloads acq_1\'s id: judged by upstream as acq_2', request: (k) => get(CSV, auth(k.acq2)), ...ok(CSV, 'acq_2') },
    { name: 'acq_2 claims acq_1 in the query', request: (k) => get(`${LIST}?acquirer_id=acq_1`, auth(k.acq2)), ...refused(400) },
    { name: 'acq_2 claims acq_1 in the query, beside a declared parameter', request: (k) => get(`${LIST}?page=1&acquirer_id=acq_1`, auth(k.acq2)), ...refused(400) },
    { name: 'list-only key downloads', request: (k) => get(CSV, auth(k.listOnly)), ...refused(403) },
    { name: 'list-only key lists (needs both)', request: (k) => get(LIST, auth(k.listOnly)), ...refused(403) },
    { name: 'read-only key lists (needs both)', request: (k) => get(LIST, auth(k.readOnly)), ...refused(403) },
    { name: 'read-only key downloads (needs both)', request: (k) => get(CSV, auth(k.readOnly)), ...refused(403) },
  ],
  methods: [
    { name: 'HEAD (no body, by HTTP)', request: (k) => req(`HEAD ${LIST} HTTP/1.1`, auth(k.acq1)), ...refused(404), head: true },
    ...['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'PROPFIND', 'PURGE'].map((method) => ({
      name: method,
      request: (k: Keys) => req(`${method} ${LIST} HTTP/1.1`, auth(k.acq1), 'Content-Length: 0'),
      ...refused(404),
    })),
    { name: 'lower-case get', request: (k) => req(`get ${LIST} HTTP/1.1`, auth(k.acq1)), ...refused(400) },
    { name: 'method override header', request: (k) => get(LIST, auth(k.acq1), 'X-HTTP-Method-Override: DELETE'), ...ok(LIST) },
    // Without body headers Node hands the request over already ended (optimizeEmptyRequests, every
    // other case here); one that declares an empty body is read as a stream, and forwarded too.
    { name: 'GET with Content-Length: 0', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: 0'), ...ok(LIST) },
    { name: 'GET with a body', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: 5') + 'hello', ...refused(400) },
    { name: 'GET with a chunked body', request: (k) => get(LIST, auth(k.acq1), 'Transfer-Encoding: chunked') + '5\r\nhello\r\n0\r\n\r\n', ...refused(400) },
    { name: 'CONNECT', request: () => 'CONNECT upstream:80 HTTP/1.1\r\nHost: upstream:80\r\n\r\n', ...refused(400) },
  ],
  'identity headers and hop-by-hop': [
    { name: 'X-Acquirer-Id', request: (k) => get(LIST, auth(k.acq1), 'X-Acquirer-Id: acq_2'), ...ok(LIST) },
    { name: 'x-acquirer-id lower case', request: (k) => get(LIST, auth(k.acq1), 'x-acquirer-id: acq_2'), ...ok(LIST) },
    { name: 'X-ACQUIRER-ID upper case', request: (k) => get(LIST, auth(k.acq1), 'X-ACQUIRER-ID: acq_2'), ...ok(LIST) },
    { name: 'underscore spelling', request: (k) => get(LIST, auth(k.acq1), 'X_Acquirer_Id: acq_2'), ...ok(LIST) },
    { name: 'dot spelling', request: (k) => get(LIST, auth(k.acq1), 'X.Acquirer.Id: acq_2'), ...ok(LIST) },
    { name: 'no separators', request: (k) => get(LIST, auth(k.acq1), 'XAcquirerId: acq_2'), ...ok(LIST) },
    { name: 'duplicated', request: (k) => get(LIST, auth(k.acq1), 'X-Acquirer-Id: acq_2', 'X-Acquirer-Id: acq_3'), ...ok(LIST) },
    { name: 'empty value', request: (k) => get(LIST, auth(k.acq1), 'X-Acquirer-Id:'), ...ok(LIST) },
    { name: 'nominated in Connection', request: (k) => get(LIST, auth(k.acq1), 'Connection: keep-alive, X-Acquirer-Id'), ...ok(LIST) },
    { name: 'Connection nominates a custom header', request: (k) => get(LIST, auth(k.acq1), 'Connection: X-Secret', 'X-Secret: 1'), ...ok(LIST) },
    { name: 'Forwarded', request: (k) => get(LIST, auth(k.acq1), 'Forwarded: for=10.0.0.1;host=internal'), ...ok(LIST) },
    { name: 'X-Forwarded-*', request: (k) => get(LIST, auth(k.acq1), 'X-Forwarded-For: 10.0.0.1', 'X-Forwarded-Host: internal', 'X-Forwarded-Proto: https'), ...ok(LIST) },
    {
      name: 'forwarding claims in CGI spellings, other X-Forwarded-* and X-Original-*, Proxy',
      request: (k) =>
        get(LIST, auth(k.acq1), 'X_Forwarded_For: 10.0.0.1', 'X.Forwarded.Proto: https', 'X-Forwarded-Ssl: on', 'X-Forwarded-Uri: /admin', 'X_Original_URL: /admin', 'X-Original-Host: internal', 'X_Real_IP: 10.0.0.1', 'X-HTTP-Method_Override: DELETE', 'Proxy: http://evil.example', 'True-Client-IP: 10.0.0.1', 'Transfer_Encoding: chunked'),
      ...ok(LIST),
    },
    {
      name: 'names with underscores or dots (nginx drops them too), identity and Envoy claims',
      request: (k) =>
        get(LIST, auth(k.acq1), 'Remote_User: admin', 'X-Remote-User: admin', 'Remote-User: admin', 'Script_Name: /internal', 'X.Custom: 1', 'X-Envoy-Original-Path: /admin', 'X-Originating-IP: 10.0.0.1', 'Forwarded-For: 10.0.0.1'),
      ...ok(LIST),
    },
    { name: 'a Cookie with another identity and a second page', request: (k) => get(`${LIST}?page=1`, auth(k.acq1), 'Cookie: acquirer_id=acq_2; page=9; _legacy_session=acq2-dashboard'), ...ok(`${LIST}?page=1`) },
    {
      name: 'sessions, certificates, users and tenants in headers of other names',
      request: (k) =>
        get(LIST, auth(k.acq1), 'X-Auth-Token: acq2-session', 'Session: acq2', 'X-Client-Cert: MIIB', 'WL-Proxy-Client-IP: 10.0.0.1', 'X-User: acq2-admin', 'X-Tenant-Id: acq_2', 'Acquirer-Id: acq_2', 'X-Api-Key: other'),
      ...ok(LIST),
    },
    { name: 'X-Real-IP', request: (k) => get(LIST, auth(k.acq1), 'X-Real-IP: 10.0.0.1'), ...ok(LIST) },
    { name: 'X-Original-URL', request: (k) => get(LIST, auth(k.acq1), 'X-Original-URL: /admin'), ...ok(LIST) },
    { name: 'X-Rewrite-URL', request: (k) => get(LIST, auth(k.acq1), 'X-Rewrite-URL: /admin'), ...ok(LIST) },
    { name: 'TE: trailers', request: (k) => get(LIST, auth(k.acq1), 'TE: trailers'), ...ok(LIST) },
    { name: 'Keep-Alive', request: (k) => get(LIST, auth(k.acq1), 'Keep-Alive: timeout=999'), ...ok(LIST) },
    { name: 'Proxy-Connection', request: (k) => get(LIST, auth(k.acq1), 'Proxy-Connection: keep-alive'), ...ok(LIST) },
    { name: 'X-Request-Id with a bare CR before another identity (header injection)', request: (k) => get(LIST, auth(k.acq1), 'X-Request-Id: abc\rX-Acquirer-Id: acq_2'), ...refused(400) },
    { name: 'X-Request-Id with a bare LF before another identity (header injection)', request: (k) => get(LIST, auth(k.acq1), 'X-Request-Id: abc\nX-Acquirer-Id: acq_2'), ...refused(400) },
    { name: 'Upgrade: websocket', request: (k) => get(LIST, auth(k.acq1), 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='), ...refused(400) },
    { name: 'Upgrade: h2c', request: (k) => get(LIST, auth(k.acq1), 'Connection: Upgrade, HTTP2-Settings', 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA'), ...refused(400) },
    { name: 'duplicate Host', request: (k) => `GET ${LIST} HTTP/1.1\r\nHost: a\r\nHost: b\r\n${auth(k.acq1)}\r\n\r\n`, ...refused(400) },
    { name: 'no Host', request: (k) => `GET ${LIST} HTTP/1.1\r\n${auth(k.acq1)}\r\n\r\n`, ...refused(400) },
    { name: 'obs-fold continuation', request: (k) => get(LIST, auth(k.acq1), 'X-Acquirer-Id: acq_1', ' acq_2'), ...refused(400) },
    { name: 'space before colon', request: (k) => get(LIST, auth(k.acq1), 'X-Acquirer-Id : acq_2'), ...refused(400) },
  ],
  'client address and whitelist': [
    { name: 'whitelisted key, spoofed X-Forwarded-For from an untrusted peer', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5'), ...refused(401) },
    { name: 'whitelisted key via a trusted proxy', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5'), ...ok(LIST) },
    { name: 'trusted proxy, right-most hop outside the whitelist', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5, 198.51.100.1'), ...refused(401) },
    { name: 'trusted proxy, whitelisted hop after a spoofed one', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 198.51.100.1, 203.0.113.5'), ...ok(LIST) },
    { name: 'trusted proxy, unparseable hop', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5, nonsense'), ...refused(401) },
    { name: 'trusted proxy, hop with a port', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5:443'), ...refused(401) },
    { name: 'trusted proxy, Forwarded is not believed', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'Forwarded: for=203.0.113.5'), ...refused(401) },
    { name: 'X-Real-IP is not believed', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Real-IP: 203.0.113.5'), ...refused(401) },
    { name: 'two X-Forwarded-For headers are read as one chain', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: 203.0.113.5', 'X-Forwarded-For: 198.51.100.1'), ...refused(401) },
    // The whitelist's IPv4 address in other spellings: IPv4-compatible IPv6 (another address), and legacy forms.
    ...['::203.0.113.5', '3405803777', '0xcb007105', '0313.0.113.5', '203.000.113.005'].map((hop) => ({
      name: `trusted proxy, the whitelisted address spelled ${hop}`,
      from: '127.0.0.2',
      request: (k: Keys) => get(LIST, auth(k.whitelisted), `X-Forwarded-For: ${hop}`),
      ...refused(401),
    })),
    { name: 'trusted proxy, the whitelisted address as IPv4-mapped IPv6', from: '127.0.0.2', request: (k) => get(LIST, auth(k.whitelisted), 'X-Forwarded-For: ::ffff:203.0.113.5'), ...ok(LIST) },
  ],
  'framing and smuggling': [
    { name: 'Content-Length and Transfer-Encoding', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: 4', 'Transfer-Encoding: chunked') + '0\r\n\r\n', ...refused(400) },
    { name: 'two Content-Length values', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: 0', 'Content-Length: 5') + 'hello', ...refused(400) },
    { name: 'signed Content-Length', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: +0'), ...refused(400) },
    { name: 'Transfer-Encoding not chunked', request: (k) => get(LIST, auth(k.acq1), 'Transfer-Encoding: xchunked'), ...refused(400) },
    { name: 'Transfer-Encoding identity', request: (k) => get(LIST, auth(k.acq1), 'Transfer-Encoding: identity'), ...refused(400) },
    { name: 'smuggled request in a GET body', request: (k) => get(LIST, auth(k.acq1), 'Content-Length: 44') + `GET /v1/acquirer/merchants HTTP/1.1\r\nHost: x\r\n\r\n`, ...refused(400) },
    { name: 'bare LF line endings', request: (k) => `GET ${LIST} HTTP/1.1\nHost: x\n${auth(k.acq1)}\n\n`, ...refused(400) },
    { name: 'HTTP/0.9 style request', request: () => `GET ${LIST}\r\n\r\n`, ...refused(400) },
    { name: 'unknown HTTP version', request: (k) => req(`GET ${LIST} HTTP/2.0`, auth(k.acq1)), ...refused(400) },
    { name: 'header name with a space', request: (k) => get(LIST, auth(k.acq1), 'X Acquirer: acq_2'), ...refused(400) },
    { name: 'control character in a header value', request: (k) => get(LIST, auth(k.acq1), 'X-Test: a\u0001b'), ...refused(400) },
    { name: 'HTTP/1.0 without Host', request: (k) => `GET ${LIST} HTTP/1.0\r\n${auth(k.acq1)}\r\n\r\n`, ...ok(LIST) },
  ],
  bodies: [
    { name: 'a JSON body, forwarded byte for byte', request: (k) => post(USERS, USER, auth(k.acq1), ...json(USER)), ...created(USER) },
    { name: 'a chunked JSON body, forwarded with its length', request: (k) => post(USERS, `5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n`, auth(k.acq1), 'Content-Type: application/json', 'Transfer-Encoding: chunked'), ...created('{"a":1}') },
    { name: 'a JSON body with Expect: 100-continue sent at once', request: (k) => post(USERS, USER, auth(k.acq1), ...json(USER), 'Expect: 100-continue'), ...created(USER) },
    { name: 'Content-Length and Transfer-Encoding on a POST', request: (k) => post(USERS, '0\r\n\r\n', auth(k.acq1), 'Content-Type: application/json', 'Content-Length: 5', 'Transfer-Encoding: chunked'), ...refused(400) },
    // Node undoes the chunking only: the bytes left are gzip's, not the JSON the gateway would check.
    { name: 'Transfer-Encoding: gzip, chunked on a POST', request: (k) => post(USERS, `2\r\n{}\r\n0\r\n\r\n`, auth(k.acq1), 'Content-Type: application/json', 'Transfer-Encoding: gzip, chunked'), ...refused(400) },
    { name: 'Transfer-Encoding given twice as chunked on a POST', request: (k) => post(USERS, `2\r\n{}\r\n0\r\n\r\n`, auth(k.acq1), 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'), ...refused(400) },
    { name: 'two Content-Length values on a POST', request: (k) => post(USERS, USER, auth(k.acq1), 'Content-Type: application/json', 'Content-Length: 2', `Content-Length: ${USER.length}`), ...refused(400) },
    // What follows is the next request, judged on its own (here without a key: 401, never forwarded).
    { name: 'a body after Content-Length: 0, read as a request of its own', request: (k) => post(USERS, `POST ${USERS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`, auth(k.acq1), 'Content-Type: application/json', 'Content-Length: 0'), ...refused(400) },
    { name: 'a request pipelined behind a body, without a key', request: (k) => post(USERS, USER + `GET ${LIST} HTTP/1.1\r\nHost: x\r\n\r\n`, auth(k.acq1), ...json(USER)), ...created(USER) },
    { name: 'charset=utf-16', request: (k) => post(USERS, USER, auth(k.acq1), 'Content-Type: application/json; charset=utf-16', `Content-Length: ${USER.length}`), ...refused(415) },
    { name: 'a charset given twice', request: (k) => post(USERS, USER, auth(k.acq1), 'Content-Type: application/json; charset=utf-8; charset=latin1', `Content-Length: ${USER.length}`), ...refused(415) },
    { name: 'multipart/form-data', request: (k) => post(USERS, '--b\r\n\r\n{}\r\n--b--', auth(k.acq1), 'Content-Type: multipart/form-data; boundary=b', 'Content-Length: 16'), ...refused(415) },
    { name: 'form-encoded', request: (k) => post(USERS, 'acquirer_id=acq_2', auth(k.acq1), 'Content-Type: application/x-www-form-urlencoded', 'Content-Length: 17'), ...refused(415) },
    { name: 'a duplicate name hidden by an escape', request: (k) => post(USERS, '{"a":1,"\\u0061":2}', auth(k.acq1), ...json('{"a":1,"\\u0061":2}')), ...refused(400) },
    { name: 'a duplicate name in an object inside an array', request: (k) => post(USERS, '[{"x":{"a":1,"a":2}}]', auth(k.acq1), ...json('[{"x":{"a":1,"a":2}}]')), ...refused(400) },
    { name: 'a tenant field in nested arrays', request: (k) => post(USERS, '{"users":[[{"acquirer":"acq_2"}]]}', auth(k.acq1), ...json('{"users":[[{"acquirer":"acq_2"}]]}')), ...refused(400) },
    { name: 'a tenant field spelled with an escape', request: (k) => post(USERS, '{"acquirer\\u005fid":"acq_2"}', auth(k.acq1), ...json('{"acquirer\\u005fid":"acq_2"}')), ...refused(400) },
    { name: 'a byte-order mark', request: (k) => post(USERS, '\u00ef\u00bb\u00bf{}', auth(k.acq1), ...json('\u00ef\u00bb\u00bf{}')), ...refused(400) },
    { name: 'overlong UTF-8', request: (k) => post(USERS, '"\u00c0\u00af"', auth(k.acq1), ...json('"\u00c0\u00af"')), ...refused(400) },
    { name: 'a declared length over the route\'s max_bytes', request: (k) => post(USERS, '', auth(k.acq1), 'Content-Type: application/json', 'Content-Length: 16385'), ...refused(413) },
    { name: 'a body on a route that takes none', request: (k) => post(LIST, '{}', auth(k.acq1), ...json('{}')), ...refused(404) },
    { name: 'a body on the disable route, which takes none', request: (k) => req(`PUT ${USERS}/0e6b4c52-2a0a-4f59-9b0e-5d3c3c9f3a11/disable HTTP/1.1`, auth(k.acq1), ...json('{}')) + '{}', ...refused(400) },
  ],
  'resource limits': [
    { name: 'a 20 KiB header', request: (k) => get(LIST, auth(k.acq1), `X-Big: ${'a'.repeat(20_000)}`), ...refused(431) },
    // Host and Authorization are two of the lines.
    { name: '101 header lines', request: (k) => get(LIST, auth(k.acq1), ...Array.from({ length: 99 }, (_, i) => `X-H${i}: 1`)), ...refused(431) },
    // Node keeps only the first 101 lines: the rest must not be dropped silently and the head taken.
    { name: '2500 header lines, in under 16 KiB', request: (k) => get(LIST, auth(k.acq1), ...Array.from({ length: 2498 }, () => 'a:1')), ...refused(431) },
    { name: '100 header lines are fine', request: (k) => get(LIST, auth(k.acq1), ...Array.from({ length: 98 }, (_, i) => `X-H${i}: 1`)), ...ok(LIST) },
    { name: 'a 10 KiB path', request: (k) => get(`${LIST}/${'a'.repeat(10_000)}`, auth(k.acq1)), ...refused(404) },
  ],
};

let redis: TestRedis;
let upstream: Awaited<ReturnType<typeof startRecordingUpstream>>;
let gateway: ServeProcess;
let keys: Keys;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startRecordingUpstream();
  const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
  const make = async (acquirer: string, permissions: string[], allowIp?: string[]) =>
    createKey(env, { acquirer, permissions, ...(allowIp ? { allowIp } : {}) });
  const [acq1, acq2, listOnly, readOnly, whitelisted, disabled] = await Promise.all([
    make('acq_1', ['eod_list', 'eod_read', 'merchant_users_create', 'merchant_users_disable']),
    make('acq_2', ['eod_list', 'eod_read']),
    make('acq_1', ['eod_list']),
    make('acq_1', ['eod_read']),
    make('acq_1', ['eod_list', 'eod_read'], ['203.0.113.0/24']),
    make('acq_1', ['eod_list', 'eod_read']),
  ]);
  expect((await runCli(['keys', 'disable', disabled!.id], env)).code).toBe(0);
  keys = { acq1: acq1!.key, acq2: acq2!.key, listOnly: listOnly!.key, readOnly: readOnly!.key, whitelisted: whitelisted!.key, disabled: disabled!.key };
  gateway = await startServe({ ...env, UPSTREAM_URL: upstream.url, TRUSTED_PROXIES: '127.0.0.2' });
}, 30_000);

afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
  await redis?.stop();
});

/** Sends the bytes on a fresh connection; returns the first response once complete (or what came before close). */
function send(bytes: string, from?: string, head = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port: gateway.port, host: '127.0.0.1', ...(from ? { localAddress: from } : {}) });
    let received = '';
    const done = () => {
      socket.destroy();
      resolve(received);
    };
    socket.setTimeout(3000, done);
    socket.on('data', (d: Buffer) => {
      // An interim 100 Continue is not the answer.
      received = (received + d.toString('latin1')).replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
      const end = received.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(received.slice(0, end));
      if (end !== -1 && (head || (length && received.length >= end + 4 + Number(length[1])))) done();
    });
    socket.on('close', () => resolve(received));
    socket.on('error', (err) => (received ? resolve(received) : reject(err)));
    socket.write(Buffer.from(bytes, 'latin1'));
  });
}

const all = Object.entries(GROUPS).flatMap(([group, cases]) => cases.map((c) => [group, c.name, c] as const));

it('has at least 100 cases', () => {
  expect(all.length).toBeGreaterThanOrEqual(100);
});

describe.each(Object.keys(GROUPS))('%s', (group) => {
  it.each(GROUPS[group]!.map((c) => [c.name, c] as const))('%s', async (_name, hostile) => {
    const before = upstream.received.length;
    const raw = await send(hostile.request(keys), hostile.from, hostile.head);
    const response = parseRawResponse(hostile.head ? raw.slice(0, raw.indexOf('\r\n\r\n') + 4) : raw);
    expect(response.status).toBe(hostile.status);
    expect(response.body).toBe(hostile.head ? '' : BODIES[hostile.status]);
    if (hostile.head) expect(response.headers['content-length']).toBe(String(BODIES[hostile.status]!.length));
    expect(response.headers['content-type']).toBe(hostile.status === 200 ? 'application/json' : 'application/json; charset=utf-8');
    const seen = upstream.received.slice(before);
    if (hostile.upstream === null) {
      expect(seen).toEqual([]);
      return;
    }
    expect(seen).toHaveLength(1);
    const [forwarded] = seen;
    expect(forwarded!.requestLine).toBe(`${hostile.upstream.method ?? 'GET'} ${hostile.upstream.target} HTTP/1.1`);
    expect(forwarded!.body).toBe(hostile.upstream.body ?? '');
    expect(rawHeaderValues(forwarded!, 'content-length')).toEqual(hostile.upstream.body === undefined ? [] : [String(Buffer.byteLength(hostile.upstream.body, 'latin1'))]);
    const identity = forwarded!.headerLines.filter((l) => l.slice(0, l.indexOf(':')).replace(/[-_.]/g, '').toLowerCase() === 'xacquirerid');
    expect(identity).toEqual([`x-acquirer-id: ${hostile.upstream.acquirer}`]);
    expect(rawHeaderValues(forwarded!, 'authorization')).toEqual([]);
    for (const name of ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'x-original-url', 'x-rewrite-url', 'x-http-method-override', 'te', 'keep-alive', 'proxy-connection', 'x-secret', 'upgrade', 'transfer-encoding', 'proxy', 'true-client-ip']) {
      expect(rawHeaderValues(forwarded!, name)).toEqual([]);
    }
    for (const name of ['remote-user', 'x-remote-user', 'x-envoy-original-path', 'x-originating-ip', 'forwarded-for', 'cookie']) {
      expect(rawHeaderValues(forwarded!, name)).toEqual([]);
    }
    // Only the listed headers, and the ones the gateway itself sets (Node's client adds Connection).
    const allowed = new Set([...FORWARDED_REQUEST_HEADERS, 'host', 'x-acquirer-id', 'x-request-id', 'connection', ...(hostile.upstream.body === undefined ? [] : ['content-type', 'content-length'])]);
    expect(forwarded!.headerLines.map((l) => l.slice(0, l.indexOf(':')).toLowerCase()).filter((n) => !allowed.has(n))).toEqual([]);
    // In any spelling a CGI-style upstream would fold into one of them (X_Forwarded_For is X-Forwarded-For to it).
    const folded = forwarded!.headerLines.map((l) => l.slice(0, l.indexOf(':')).replace(/[-_.]/g, '').toLowerCase());
    expect(folded.filter((n) => /^x(forwarded|original|realip|httpmethod)|^(forwarded|proxy|trueclientip|transferencoding)$/.test(n))).toEqual([]);
    // The upstream's own name, whatever Host the client sent.
    expect(rawHeaderValues(forwarded!, 'host')).toEqual([new URL(upstream.url).host]);
  });
});
