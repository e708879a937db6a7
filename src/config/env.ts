/**
 * @module
 * Every setting of `serve`, read from the environment or a flag of the same name, checked once at
 * start-up: a bad value stops start-up with one line naming the variable.
 */
import { z } from 'zod';
import type { IpAllowlist } from '../net/ip-allowlist.js';
import {
  DEFAULT_ADMIN_HOST,
  DEFAULT_ADMIN_PORT,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_KEY_CACHE_MAX_ENTRIES,
  DEFAULT_KEY_CACHE_TTL_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_OUTAGE_GRACE_MS,
  DEFAULT_POLICY_FILE,
  DEFAULT_PORT,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_STREAM_IDLE_TIMEOUT_MS,
  DEFAULT_UPSTREAM_MAX_SOCKETS,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_WORKER_UNRESPONSIVE_MS,
} from './defaults.js';
import { adminToken, booleanText, cidrList, httpOrigin, integer, ipLiteral, logLevel, shareOfPool, signingSecrets, workerCount } from './setting-types.js';

import { field } from './field.js';
import { REDIS_CONNECTION_FIELDS } from './redis-fields.js';

export type { FieldSpec } from './field.js';

/** Every setting of `serve`: one place for names, defaults, validation and their documentation. */
export const CONFIG_FIELDS = {
  port: field({
    env: 'PORT',
    default: String(DEFAULT_PORT),
    summary: 'public listener port (0: any free port)',
    description: 'Public listener port (0: any free port).',
    schema: integer(0, 65535),
  }),
  host: field({
    env: 'HOST',
    default: DEFAULT_HOST,
    summary: 'public bind address, an IP literal',
    description: 'Bind address of the public listener, an IP literal (`::` is dual-stack). `npm start` binds `127.0.0.1` unless `HOST` is set: it mints live keys.',
    schema: ipLiteral(':: or 127.0.0.1'),
  }),
  adminPort: field({
    env: 'ADMIN_PORT',
    default: String(DEFAULT_ADMIN_PORT),
    summary: 'admin listener port: /metrics, /healthz, /readyz',
    description: 'Admin listener port: `/metrics`, `/healthz`, `/readyz` (0: any free port).',
    schema: integer(0, 65535),
  }),
  adminHost: field({
    env: 'ADMIN_HOST',
    default: DEFAULT_ADMIN_HOST,
    summary: 'admin bind address, an IP literal',
    description: 'Admin bind address, an IP literal. Keep it off the public network: the container image sets `0.0.0.0`, so publish the port only to your monitoring network.',
    schema: ipLiteral('127.0.0.1'),
  }),
  adminToken: field({
    env: 'ADMIN_TOKEN',
    default: '',
    summary: 'bearer token /metrics and /readyz require (none)',
    description:
      'When set, `/metrics` and `/readyz` answer only a request with `Authorization: Bearer <token>` (Prometheus: the scrape config\'s `authorization` setting); anything else is 401. `/healthz` stays open for a container\'s health check. 16 to 256 visible ASCII characters. Never echoed or logged.',
    schema: adminToken,
    secret: true,
  }),
  upstreamUrl: field({
    env: 'UPSTREAM_URL',
    default: undefined,
    summary: 'the legacy service, as an origin: http://host:port',
    description: 'The service behind the gateway, as an origin (`http://host:port`, or `https://`). A path, query or credentials are refused: the path a client asked for goes upstream exactly as matched. Never echoed in errors.',
    schema: httpOrigin,
    secret: true,
  }),
  acquirerSigningSecret: field({
    env: 'ACQUIRER_SIGNING_SECRET',
    default: '',
    summary: 'HMAC secret signing each forwarded request (none)',
    description:
      'When set, every request forwarded upstream carries `X-Acquirer-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>` over the second, the method, the request-target, the acquirer id and the key id, and the key id in `X-Acquirer-Key-Id`, so that the backend can check that a request came through the gateway, and not long ago (docs/security.md, "Verifying the acquirer header"). One secret, or two separated by a comma while rotating, the new one first: the header then carries a `v1=` for each, in that order. Each at least 32 characters, with no comma or white space. Unset, neither header is sent. Never echoed or logged.',
    schema: signingSecrets,
    secret: true,
  }),
  ...REDIS_CONNECTION_FIELDS,
  policyFile: field({
    env: 'POLICY_FILE',
    default: DEFAULT_POLICY_FILE,
    summary: 'the route policy (docs/policy.md)',
    description: 'The route policy (docs/policy.md). At most 256 KiB.',
    schema: z.string().min(1, 'must not be empty'),
  }),
  policyWatch: field({
    env: 'POLICY_WATCH',
    default: 'true',
    summary: 'reload the policy when its file changes',
    description: 'Reload the policy when its file changes (`false`: only on SIGHUP, which always reloads).',
    schema: booleanText,
  }),
  policyShadowFile: field({
    env: 'POLICY_SHADOW_FILE',
    default: '',
    summary: 'a candidate policy judged beside it, never enforced',
    description:
      'A candidate policy (docs/policy.md, "Trying a policy in the shadow"): every request with a valid key is also judged by it at the route, permission and query steps, never enforced; where its verdict differs, `acquirer_gateway_shadow_disagreements_total` counts it and a `shadow_disagreement` line (sampled) says so. Refused at start-up as `POLICY_FILE` is; reloaded when `POLICY_FILE` is (`POLICY_WATCH`, SIGHUP). With `WORKERS` above 1 the primary reads it and gives it to every worker, as it does `POLICY_FILE`, and `/metrics` sums what the workers count. Unset: none, at no cost.',
    schema: z.string(),
  }),
  trustedProxies: field({
    env: 'TRUSTED_PROXIES',
    default: '',
    summary: 'IPs/CIDRs whose X-Forwarded-For is believed',
    description:
      'Comma-separated IPs and CIDRs whose `X-Forwarded-For` is believed: exactly the load balancers in front of the gateway. Checked as `--allow-ip` is: a `/0`, or entries that together cover every IPv4 or every IPv6 address, would let any client name its own address, and are refused.',
    schema: cidrList,
  }),
  upstreamTimeoutMs: field({
    env: 'UPSTREAM_TIMEOUT_MS',
    default: String(DEFAULT_UPSTREAM_TIMEOUT_MS),
    summary: 'until the upstream starts answering; then 504',
    description: 'Time allowed for the upstream to start answering (response headers); then 504. A download that has started is not cut by it.',
    schema: integer(1, 3_600_000),
  }),
  streamIdleTimeoutMs: field({
    env: 'STREAM_IDLE_TIMEOUT_MS',
    default: String(DEFAULT_STREAM_IDLE_TIMEOUT_MS),
    summary: 'a streaming answer on which nothing moves is cut',
    description:
      "Once an answer is streaming: when no byte has passed to the client for this long, both connections are cut. Progress is looked at by the exchange's one timer, which ticks at least this often and on the `UPSTREAM_TIMEOUT_MS` deadline (every 30 s with the defaults), so a stall is cut after at least this long, and before this long rounded up to whole ticks plus one tick (60–90 s with the defaults; `UPSTREAM_TIMEOUT_MS=1000` with `STREAM_IDLE_TIMEOUT_MS=1100` ticks every second and cuts within 2–3 s). A client that stopped reading, or an upstream that stopped sending, would otherwise hold a pooled upstream connection as long as the client stays connected. Progress is counted when the kernel takes more bytes for the client's socket, which, with a large send buffer, it does in large steps: a client that reads, but slower than about a third of its send buffer per `STREAM_IDLE_TIMEOUT_MS` (a few tens of KiB/s with the default and Linux's usual 4 MiB buffer), is cut as stalled.",
    schema: integer(1000, 3_600_000),
  }),
  upstreamMaxSockets: field({
    env: 'UPSTREAM_MAX_SOCKETS',
    default: String(DEFAULT_UPSTREAM_MAX_SOCKETS),
    summary: 'keep-alive connections to the upstream, at most',
    description: 'Keep-alive connections to the upstream, at most. A request waits for one while all are busy, within `UPSTREAM_TIMEOUT_MS` (then 504, counted as `kind="pool_exhausted"`).',
    schema: integer(1, 65535),
  }),
  acquirerMaxInFlight: field({
    env: 'ACQUIRER_MAX_IN_FLIGHT',
    default: 'half',
    summary: "one acquirer's requests under way at once (then 429)",
    description:
      'Requests of one acquirer (all its keys) under way at once, at most, in each process (with `WORKERS`, each worker): from the reading of a request body to the end of the answer. `half`: half of `UPSTREAM_MAX_SOCKETS`, rounded up (128 with the defaults); a count may not be more than `UPSTREAM_MAX_SOCKETS`. One more is answered 429 `{"message":"Too many requests"}` with `Retry-After: 1`, before its body is read and before the upstream is asked. A download a client reads slowly, or not at all, holds a pooled upstream connection until the stall watch cuts it, and a body sent slowly holds memory: a share keeps one acquirer\'s clients from holding all of the pool, or memory for a body on every connection, and making every other acquirer\'s requests wait and time out. The share is given back when the client\'s response ends; an error answer whose upstream body is still being read and thrown away (at most 64 KiB or 1 s) holds its connection a little longer.',
    schema: shareOfPool,
  }),
  rateLimitStore: field({
    env: 'RATE_LIMIT_STORE',
    default: 'local',
    summary: 'where keys\' rates are counted: local or redis',
    description:
      'Where the rates a policy declares (docs/policy.md, "Rate limits") are counted. `local`: in each process, with no Redis call on a request\'s path; each gateway lets a key through at the rate divided by the gateways live (each says so in Redis every 2 s, and counts the others in the background), which is the rate itself when the load balancer spreads a key\'s requests evenly. `redis`: exact for the whole fleet, one Redis round trip (one script) per limited request; needs Redis (not the embedded key store). A policy without rates costs nothing either way: no connection is opened for them.',
    schema: z.enum(['local', 'redis'], 'must be local or redis'),
  }),
  rateLimitFail: field({
    env: 'RATE_LIMIT_FAIL',
    default: 'open',
    summary: 'with RATE_LIMIT_STORE=redis down: open (allow) or closed (503)',
    description:
      'With `RATE_LIMIT_STORE=redis`, what a request is told when Redis does not answer its rate within `REDIS_COMMAND_TIMEOUT_MS`: `open`, let through (counted in `acquirer_gateway_rate_limit_store_errors_total` and logged as `rate_limit_store_problem`), so that an outage of the counter does not become an outage of the API; `closed`, refused with 503 `{"message":"Service unavailable"}`.',
    schema: z.enum(['open', 'closed'], 'must be open or closed'),
  }),
  redisCommandTimeoutMs: field({
    env: 'REDIS_COMMAND_TIMEOUT_MS',
    default: String(DEFAULT_REDIS_COMMAND_TIMEOUT_MS),
    summary: 'a Redis lookup not answered in this time fails',
    description: 'A key lookup Redis does not answer in this time fails (503 unless the key is cached).',
    schema: integer(1, 60_000),
  }),
  keyCacheTtlMs: field({
    env: 'KEY_CACHE_TTL_MS',
    default: String(DEFAULT_KEY_CACHE_TTL_MS),
    summary: 'any verdict on a key is trusted in-process this long',
    description: 'How long any verdict on a key (valid, disabled or unknown alike, so that none can be told from another by when it is asked again) is trusted in-process before Redis is asked again. Changes arrive sooner, by change notices; while those are down (the subscription refused or reconnecting) a verdict is trusted for 1 s at most.',
    schema: integer(0, 86_400_000),
  }),
  keyCacheMaxEntries: field({
    env: 'KEY_CACHE_MAX_ENTRIES',
    default: String(DEFAULT_KEY_CACHE_MAX_ENTRIES),
    summary: 'keys cached in-process, at most',
    description:
      'Keys kept in-process, at most (least recently used go first). Unknown keys have a cache of the same size of their own. Both reserve their memory at start-up, about 16 bytes an entry each, in every process: 10,000,000 takes about 300 MiB before any key is cached.',
    schema: integer(1, 10_000_000),
  }),
  keyOutageGraceMs: field({
    env: 'KEY_OUTAGE_GRACE_MS',
    default: String(DEFAULT_OUTAGE_GRACE_MS),
    summary: 'cached keys keep working this long while Redis is out',
    description: 'While Redis is unreachable, keys already cached keep working this long (those Redis confirmed within `KEY_CACHE_TTL_MS` + this); then every request gets 503.',
    schema: integer(0, 3_600_000),
  }),
  headersTimeoutMs: field({
    env: 'HEADERS_TIMEOUT_MS',
    default: String(DEFAULT_HEADERS_TIMEOUT_MS),
    summary: 'a client has this long to send its request head',
    description:
      "Time a client has to send the whole request head; then the connection is closed (slow-loris), within a second of the deadline (Node's own check would run every 30 s). May not be longer than `REQUEST_TIMEOUT_MS`.",
    schema: integer(1000, 600_000),
  }),
  requestTimeoutMs: field({
    env: 'REQUEST_TIMEOUT_MS',
    default: String(DEFAULT_REQUEST_TIMEOUT_MS),
    summary: 'a client has this long to send its whole request',
    description: 'Time a client has to send the whole request, head and body (not the response: downloads are not cut); enforced within a second, as `HEADERS_TIMEOUT_MS`.',
    schema: integer(1000, 3_600_000),
  }),
  keepAliveTimeoutMs: field({
    env: 'KEEP_ALIVE_TIMEOUT_MS',
    default: String(DEFAULT_KEEP_ALIVE_TIMEOUT_MS),
    summary: 'an idle client connection is kept open this long',
    description:
      "How long an idle client keep-alive connection is kept open, as the `Keep-Alive: timeout=` header says (in whole seconds, rounded down). Node closes it a second after that (its keepAliveTimeoutBuffer), so a client that believes the header never sends a request into a closing connection. At least 1: Node reads 0 as no limit at all.",
    schema: integer(1, 600_000),
  }),
  maxConnections: field({
    env: 'MAX_CONNECTIONS',
    default: String(DEFAULT_MAX_CONNECTIONS),
    summary: 'client connections open at once, at most',
    description:
      "Client connections open at once, at most, in each process (with `WORKERS`, each worker). One accepted beyond it is closed at once, without an answer, counted in `acquirer_gateway_connections_dropped_total` and logged at `warn` (at most every 10 s, with how many since). Without a bound, a flood of idle connections takes file descriptors until the upstream and Redis connections, and every other client, fail; each idle connection holds about 6 KiB, up to about 15 KiB with a head half sent, until `HEADERS_TIMEOUT_MS` closes it. Keep it below the process's descriptor limit (`ulimit -n`) with room for `UPSTREAM_MAX_SOCKETS` and Redis.",
    schema: integer(1, 1_000_000),
  }),
  shutdownTimeoutMs: field({
    env: 'SHUTDOWN_TIMEOUT_MS',
    default: String(DEFAULT_SHUTDOWN_TIMEOUT_MS),
    summary: 'on SIGTERM, requests in flight get this long',
    description: 'On SIGTERM or SIGINT, how long requests in flight (downloads too) may take to finish before their connections are closed.',
    schema: integer(0, 3_600_000),
  }),
  workers: field({
    env: 'WORKERS',
    default: '1',
    summary: 'processes serving requests (auto: one per core)',
    description:
      'Processes serving requests. `1`: this process. More, or `auto` (one per core): a node:cluster primary forks that many workers sharing the port, serves `/metrics` (summed over the workers) and `/readyz` for all of them, and replaces a worker that dies (docs/operations.md).',
    schema: workerCount,
  }),
  workerUnresponsiveMs: field({
    env: 'WORKER_UNRESPONSIVE_MS',
    default: String(DEFAULT_WORKER_UNRESPONSIVE_MS),
    summary: 'a worker answering nothing this long is replaced',
    description:
      "With `WORKERS` above 1: a worker that has answered none of the primary's questions (one every 2 s, each given 1 s) for about this long, rounded to whole questions (its event loop is stuck, or it was stopped), or that has not started listening within it, is killed, logged at `error`, and replaced. At least 4000.",
    schema: integer(4_000, 600_000),
  }),
  logLevel: field({
    env: 'LOG_LEVEL',
    default: 'info',
    summary: 'fatal, error, warn, info, debug, trace or silent',
    description: 'The lowest level of line written: fatal, error, warn, info, debug, trace or silent.',
    schema: logLevel,
  }),
} as const;

type Fields = typeof CONFIG_FIELDS;
export type Config = { readonly [K in keyof Fields]: z.output<Fields[K]['schema']> } & {
  readonly trustedProxyList: IpAllowlist | null;
};

