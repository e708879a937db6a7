/**
 * @module
 * Reads the settings (env.ts) from the environment and flags: every problem found, one line each,
 * each naming its variable.
 */
import { halfOfPool } from './defaults.js';
import { CONFIG_FIELDS, type Config, type FieldSpec } from './env.js';
import { compileAllowlist } from '../net/ip-allowlist.js';
import { hashTagOf } from './redis-fields.js';

type Fields = typeof CONFIG_FIELDS;

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
  if (problems.length === 0) problems.push(...redisModeProblems(values));
  if (problems.length > 0) throw new ConfigError(problems);
  const trusted = values.trustedProxies as string[];
  return { ...(values as Omit<Config, 'trustedProxyList'>), trustedProxyList: trusted.length === 0 ? null : compileAllowlist(trusted) };
}

/** The Redis settings that only make sense together (one place: serve and the key commands both ask it). */
export function redisModeProblems(values: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  const sentinels = values.redisSentinels as readonly unknown[];
  if (sentinels.length > 0 && values.redisSentinelName === '') problems.push('REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the name the Sentinels monitor the primary by)');
  if (sentinels.length === 0 && values.redisSentinelName !== '') problems.push('REDIS_SENTINEL_NAME: set, but REDIS_SENTINELS is empty');
  const clusterNodes = values.redisClusterNodes as readonly unknown[];
  if (clusterNodes.length > 0 && sentinels.length > 0) problems.push('REDIS_CLUSTER_NODES: set together with REDIS_SENTINELS; choose one way to reach Redis');
  if (clusterNodes.length > 0 && hashTagOf(values.redisKeyPrefix as string) === null) {
    const name = (values.redisKeyPrefix as string).replace(/:$/, '').replaceAll(/[{}]/g, '') || 'acquirer-gateway';
    problems.push(`REDIS_KEY_PREFIX: must hold a hash tag in Cluster mode, so that every key and the notice channel share one slot, e.g. {${name}}: (got ${JSON.stringify(values.redisKeyPrefix)})`);
  }
  // REDIS_URL is not used then: its rediss:// would be the only sign of TLS wanted, silently dropped.
  if ((clusterNodes.length > 0 || sentinels.length > 0) && (values.redisUrl as string).startsWith('rediss:') && values.redisTls !== true) {
    problems.push(`REDIS_TLS: REDIS_URL's rediss:// is not used with ${clusterNodes.length > 0 ? 'REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS'}; set REDIS_TLS=true for TLS`);
  }
  if (sentinels.length === 0 && clusterNodes.length === 0) {
    const url = new URL(values.redisUrl as string);
    if (url.password !== '' && values.redisPassword !== '') problems.push('REDIS_PASSWORD: REDIS_URL holds a password too; set it in one place');
    if (url.username !== '' && values.redisUsername !== '') problems.push('REDIS_USERNAME: REDIS_URL holds a user too; set it in one place');
  }
  return problems;
}
