import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { compileAllowlist, familyCoveredWhole, parseCidr, type IpAllowlist } from '../net/ip-allowlist.js';
import {
  DEFAULT_ADMIN_HOST,
  DEFAULT_ADMIN_PORT,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_KEY_CACHE_MAX_ENTRIES,
  DEFAULT_KEY_CACHE_TTL_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_NEGATIVE_CACHE_TTL_MS,
  DEFAULT_OUTAGE_GRACE_MS,
  DEFAULT_POLICY_FILE,
  DEFAULT_PORT,
  DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
  DEFAULT_REDIS_KEY_PREFIX,
  DEFAULT_REDIS_URL,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_STREAM_IDLE_TIMEOUT_MS,
  DEFAULT_UPSTREAM_MAX_SOCKETS,
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  DEFAULT_WORKER_UNRESPONSIVE_MS,
  halfOfPool,
} from './defaults.js';

const integer = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be an integer from ${min} to ${max}`);

/** `auto`: one per core the process may use. */
const workerCount = z.string().transform((text, ctx) => {
  if (text === 'auto') return availableParallelism();
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 256)) ctx.addIssue({ code: 'custom', message: 'must be auto or an integer from 1 to 256' });
  return n;
});
/** `half` (UPSTREAM_MAX_SOCKETS's, rounded up: resolved by loadConfig, as 0 here) or a count. */
const shareOfPool = z.string().transform((text, ctx) => {
  if (text === 'half') return 0;
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 65535)) ctx.addIssue({ code: 'custom', message: 'must be half or an integer from 1 to 65535' });
  return n;
});
const httpOrigin = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute http:// or https:// URL' });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: 'must use http or https' });
  else if (url.username || url.password) ctx.addIssue({ code: 'custom', message: 'must not contain credentials' });
  else if (url.pathname !== '/' || url.search || url.hash) {
    // The path a client asked for goes upstream exactly as matched; a base path would change it.
    ctx.addIssue({ code: 'custom', message: 'must be an origin (scheme, host, port) without path, query or fragment' });
  }
});

/**
 * The database is the path's number and nothing else: ioredis reads any other path as database 0
 * (after a failed SELECT), and takes options from a query (`?db=`, `?password=`), so either would
 * have the gateway check keys against another set than the one named.
 */
const redisUrl = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return void ctx.addIssue({ code: 'custom', message: 'must be a redis:// or rediss:// URL' });
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') ctx.addIssue({ code: 'custom', message: 'must use redis:// or rediss://' });
  else if (!/^(?:\/(?:0|[1-9]\d{0,8})?)?$/.test(url.pathname)) ctx.addIssue({ code: 'custom', message: 'the path must be a database number (redis://host:6379/2), or nothing' });
  else if (url.search !== '' || url.hash !== '') ctx.addIssue({ code: 'custom', message: 'must not have a query or fragment (the database is the path: redis://host:6379/2)' });
});

const cidrList = z.string().transform((text, ctx) => {
  const cidrs: string[] = [];
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const parsed = parseCidr(entry);
    if (!parsed.ok) ctx.addIssue({ code: 'custom', message: `"${entry}": ${parsed.reason}${parsed.everyAddress ? "; list exactly the proxies' addresses" : ''}` });
    else cidrs.push(parsed.cidr);
  }
  const whole = familyCoveredWhole(cidrs);
  if (whole !== null) ctx.addIssue({ code: 'custom', message: `together these trust every ${whole} address` });
  return cidrs;
});

interface FieldSpec<T> {
  readonly env: string;
  readonly default: string | undefined;
  readonly description: string;
  readonly schema: z.ZodType<T, string>;
  /** Never echo the value in an error: it may hold a password. */
  readonly secret?: boolean;
}

const field = <T>(spec: FieldSpec<T>) => spec;

/** Every setting of `serve`: one place for names, defaults, validation and the README's table. */
export const CONFIG_FIELDS = {
  port: field({ env: 'PORT', default: String(DEFAULT_PORT), description: 'Public listener port (0: any free port).', schema: integer(0, 65535) }),
  host: field({ env: 'HOST', default: DEFAULT_HOST, description: 'Bind address, an IP literal (`::` is dual-stack).', schema: z.string().refine((h) => isIP(h) !== 0, 'must be an IPv4 or IPv6 address, e.g. :: or 127.0.0.1') }),
  adminPort: field({ env: 'ADMIN_PORT', default: String(DEFAULT_ADMIN_PORT), description: 'Admin listener port: /metrics, /healthz, /readyz (0: any free port).', schema: integer(0, 65535) }),
  adminHost: field({ env: 'ADMIN_HOST', default: DEFAULT_ADMIN_HOST, description: 'Admin bind address, an IP literal. Keep it off the public network.', schema: z.string().refine((h) => isIP(h) !== 0, 'must be an IPv4 or IPv6 address, e.g. 127.0.0.1') }),
  upstreamUrl: field({ env: 'UPSTREAM_URL', default: undefined, description: 'The statements service, as an origin (`http://host:port`). Required.', schema: httpOrigin, secret: true }),
  redisUrl: field({ env: 'REDIS_URL', default: DEFAULT_REDIS_URL, description: 'The key store.', schema: redisUrl, secret: true }),
  redisKeyPrefix: field({ env: 'REDIS_KEY_PREFIX', default: DEFAULT_REDIS_KEY_PREFIX, description: 'Namespace of every Redis key and channel the gateway uses.', schema: z.string().min(1, 'must not be empty') }),
  policyFile: field({ env: 'POLICY_FILE', default: DEFAULT_POLICY_FILE, description: 'The route policy.', schema: z.string().min(1, 'must not be empty') }),
  policyWatch: field({ env: 'POLICY_WATCH', default: 'true', description: 'Reload the policy when its file changes (SIGHUP always reloads).', schema: z.enum(['true', 'false'], 'must be true or false').transform((v) => v === 'true') }),
  trustedProxies: field({ env: 'TRUSTED_PROXIES', default: '', description: 'Comma-separated IPs/CIDRs whose `X-Forwarded-For` is believed.', schema: cidrList }),
  upstreamTimeoutMs: field({ env: 'UPSTREAM_TIMEOUT_MS', default: String(DEFAULT_UPSTREAM_TIMEOUT_MS), description: 'Time allowed for the upstream to start answering (response headers); then 504.', schema: integer(1, 3_600_000) }),
  streamIdleTimeoutMs: field({ env: 'STREAM_IDLE_TIMEOUT_MS', default: String(DEFAULT_STREAM_IDLE_TIMEOUT_MS), description: 'Once an answer is streaming to the client: no byte passing for this long (a client that stopped reading, an upstream that stopped sending) cuts both connections.', schema: integer(1000, 3_600_000) }),
  upstreamMaxSockets: field({ env: 'UPSTREAM_MAX_SOCKETS', default: String(DEFAULT_UPSTREAM_MAX_SOCKETS), description: 'Keep-alive connections to the upstream, at most. A request waits for one while all are busy, within UPSTREAM_TIMEOUT_MS (then 504, counted as kind="pool_exhausted").', schema: integer(1, 65535) }),
  acquirerMaxInFlight: field({ env: 'ACQUIRER_MAX_IN_FLIGHT', default: 'half', description: 'Requests of one acquirer being proxied at once, at most (each process); one more is answered 429 with Retry-After: 1. `half`: half of UPSTREAM_MAX_SOCKETS (rounded up), so one acquirer cannot hold every upstream connection.', schema: shareOfPool }),
  redisCommandTimeoutMs: field({ env: 'REDIS_COMMAND_TIMEOUT_MS', default: String(DEFAULT_REDIS_COMMAND_TIMEOUT_MS), description: 'A key lookup Redis does not answer in this time fails (503 unless cached).', schema: integer(1, 60_000) }),
  keyCacheTtlMs: field({ env: 'KEY_CACHE_TTL_MS', default: String(DEFAULT_KEY_CACHE_TTL_MS), description: 'How long a valid key is trusted in-process before Redis is asked again. Changes arrive sooner by pub/sub.', schema: integer(0, 86_400_000) }),
  keyCacheMaxEntries: field({ env: 'KEY_CACHE_MAX_ENTRIES', default: String(DEFAULT_KEY_CACHE_MAX_ENTRIES), description: 'Keys kept in-process, at most (least recently used go first). Unknown keys have a cache of the same size of their own. Both reserve their memory at start-up, about 16 bytes an entry each, in every process: 10,000,000 takes about 300 MiB before any key is cached.', schema: integer(1, 10_000_000) }),
  keyNegativeCacheTtlMs: field({ env: 'KEY_NEGATIVE_CACHE_TTL_MS', default: String(DEFAULT_NEGATIVE_CACHE_TTL_MS), description: 'How long an unknown key is remembered as unknown.', schema: integer(0, 3_600_000) }),
  keyOutageGraceMs: field({ env: 'KEY_OUTAGE_GRACE_MS', default: String(DEFAULT_OUTAGE_GRACE_MS), description: 'While Redis is unreachable, keys already cached keep working this long; then every request gets 503.', schema: integer(0, 3_600_000) }),
  headersTimeoutMs: field({ env: 'HEADERS_TIMEOUT_MS', default: String(DEFAULT_HEADERS_TIMEOUT_MS), description: 'Time a client has to send the whole request head; then the connection is closed.', schema: integer(1000, 600_000) }),
  requestTimeoutMs: field({ env: 'REQUEST_TIMEOUT_MS', default: String(DEFAULT_REQUEST_TIMEOUT_MS), description: 'Time a client has to send the whole request (head and body).', schema: integer(1000, 3_600_000) }),
  keepAliveTimeoutMs: field({ env: 'KEEP_ALIVE_TIMEOUT_MS', default: String(DEFAULT_KEEP_ALIVE_TIMEOUT_MS), description: 'How long an idle client keep-alive connection is kept open, as the `Keep-Alive: timeout=` header says (in whole seconds, rounded down). Node closes it a second after that (its keepAliveTimeoutBuffer), so a client that believes the header never sends a request into a closing connection. At least 1: Node reads 0 as no limit at all.', schema: integer(1, 600_000) }),
  maxConnections: field({ env: 'MAX_CONNECTIONS', default: String(DEFAULT_MAX_CONNECTIONS), description: 'Client connections open at once, at most (each process, with WORKERS); one accepted beyond it is closed at once, without an answer. Keeps a flood of idle connections from taking the descriptors and memory that the upstream, Redis and the clients already served need.', schema: integer(1, 1_000_000) }),
  shutdownTimeoutMs: field({ env: 'SHUTDOWN_TIMEOUT_MS', default: String(DEFAULT_SHUTDOWN_TIMEOUT_MS), description: 'On SIGTERM/SIGINT, how long requests in flight (downloads too) may take to finish before connections are closed.', schema: integer(0, 3_600_000) }),
  workers: field({ env: 'WORKERS', default: '1', description: 'Processes serving requests. 1: this process. More (or `auto`, one per core): a node:cluster primary forks that many workers sharing the port, serves the admin endpoints for all of them and replaces a worker that dies.', schema: workerCount }),
  workerUnresponsiveMs: field({ env: 'WORKER_UNRESPONSIVE_MS', default: String(DEFAULT_WORKER_UNRESPONSIVE_MS), description: 'With WORKERS above 1: a worker that has answered none of the primary\'s questions (one every 2 s) for about this long, or has not started within it, is killed and replaced.', schema: integer(4_000, 600_000) }),
  logLevel: field({ env: 'LOG_LEVEL', default: 'info', description: 'fatal, error, warn, info, debug, trace or silent.', schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], 'must be one of fatal, error, warn, info, debug, trace, silent') }),
} as const;

type Fields = typeof CONFIG_FIELDS;
export type Config = { readonly [K in keyof Fields]: z.output<Fields[K]['schema']> } & {
  readonly trustedProxyList: IpAllowlist | null;
};

/** The command-line flag for a variable: PORT → --port, UPSTREAM_URL → --upstream-url. */
export function flagName(env: string): string {
  return env.toLowerCase().replaceAll('_', '-');
}

export class ConfigError extends Error {
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

function readField<T>(spec: FieldSpec<T>, given: string | undefined): { ok: true; value: T } | { ok: false; problem: string } {
  const raw = given ?? spec.default;
  if (raw === undefined) return { ok: false, problem: `${spec.env}: required (set ${spec.env} or pass --${flagName(spec.env)})` };
  const parsed = spec.schema.safeParse(raw);
  if (parsed.success) return { ok: true, value: parsed.data };
  const got = spec.secret ? '' : ` (got ${JSON.stringify(raw)})`;
  return { ok: false, problem: `${spec.env}: ${parsed.error.issues.map((i) => i.message).join('; ')}${got}` };
}

/** One setting from the environment, checked as `serve` checks it (for other commands that use it). Throws ConfigError. */
export function readSetting<T>(env: NodeJS.ProcessEnv, spec: FieldSpec<T>): T {
  const read = readField(spec, env[spec.env]);
  if (!read.ok) throw new ConfigError([read.problem]);
  return read.value;
}

/**
 * Builds the configuration from the environment, with flags (keyed by flag name without dashes,
 * e.g. `port`, `upstream-url`) taking precedence. Throws ConfigError with one line per problem,
 * each naming the variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv, flags: Readonly<Record<string, string | undefined>> = {}): Config {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(CONFIG_FIELDS) as [keyof Fields, FieldSpec<unknown>][]) {
    const read = readField(spec, flags[flagName(spec.env)] ?? env[spec.env]);
    if (read.ok) values[key] = read.value;
    else problems.push(read.problem);
  }
  if (problems.length === 0 && (values.headersTimeoutMs as number) > (values.requestTimeoutMs as number)) {
    problems.push('HEADERS_TIMEOUT_MS: must not be longer than REQUEST_TIMEOUT_MS');
  }
  if (problems.length === 0 && values.acquirerMaxInFlight === 0) values.acquirerMaxInFlight = halfOfPool(values.upstreamMaxSockets as number);
  // A share larger than the pool protects no acquirer from another.
  if (problems.length === 0 && (values.acquirerMaxInFlight as number) > (values.upstreamMaxSockets as number)) {
    problems.push(`ACQUIRER_MAX_IN_FLIGHT: must not be more than UPSTREAM_MAX_SOCKETS (${values.upstreamMaxSockets as number}); about half of it leaves the other acquirers the rest`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const trusted = values.trustedProxies as string[];
  return { ...(values as Omit<Config, 'trustedProxyList'>), trustedProxyList: trusted.length === 0 ? null : compileAllowlist(trusted) };
}
