/**
 * @module
 * The default of every setting, in one place. The environment schema (`env.ts`) and the modules
 * that take these values as options both read them from here, so this module imports nothing.
 */

export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = '::';
export const DEFAULT_ADMIN_PORT = 9090;
export const DEFAULT_ADMIN_HOST = '127.0.0.1';
export const DEFAULT_POLICY_FILE = 'policies/acquirer-api.yaml';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';
export const DEFAULT_REDIS_KEY_PREFIX = 'acquirer-gateway:';
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 500;
/** How often both Redis connections are pinged: a stalled socket never closes by itself. */
export const DEFAULT_REDIS_HEALTH_CHECK_INTERVAL_MS = 1_000;

export const DEFAULT_KEY_CACHE_TTL_MS = 60_000;
export const DEFAULT_KEY_CACHE_MAX_ENTRIES = 10_000;
export const DEFAULT_NEGATIVE_CACHE_MAX_ENTRIES = 10_000;
export const DEFAULT_OUTAGE_GRACE_MS = 30_000;
/** Without change notices (the subscription is down while lookups work), how long a cached verdict is trusted. */
export const NOTICELESS_TRUST_MS = 1_000;
/** While key lookups fail, how often the resolver makes one of its own to see whether Redis answers again. */
export const DEFAULT_FAILURE_PROBE_INTERVAL_MS = 1_000;

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 60_000;
export const DEFAULT_UPSTREAM_MAX_SOCKETS = 256;
/** ACQUIRER_MAX_IN_FLIGHT's `half`: one acquirer leaves the others (at least) half the upstream pool. */
export const halfOfPool = (upstreamMaxSockets: number): number => Math.ceil(upstreamMaxSockets / 2);

export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_CONNECTIONS = 4096;
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;
export const DEFAULT_WORKER_UNRESPONSIVE_MS = 10_000;
