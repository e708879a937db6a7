import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { UPSTREAM_ERROR_KINDS } from '../../errors/upstream-errors.js';

/**
 * Every metric the gateway exports, on one registry per gateway instance. Label values are closed
 * sets (route ids from the policy, a fixed list of reasons and kinds, statuses, known methods):
 * never a raw path, a key, a key id or a client address, so cardinality stays bounded whatever
 * clients send.
 */
export interface GatewayMetrics {
  readonly registry: Registry;
  readonly requests: Counter<'route' | 'method' | 'status'>;
  readonly requestDuration: Histogram<'route'>;
  readonly requestBodyBytes: Histogram<'route'>;
  readonly denials: Counter<'reason'>;
  readonly keyResolutions: Counter<'layer' | 'result'>;
  readonly upstreamDuration: Histogram<'route'>;
  readonly upstreamErrors: Counter<'kind'>;
  readonly upstreamRetries: Counter;
  readonly upstreamUnaskedBytes: Counter;
  readonly connectionsDropped: Counter;
  readonly upstreamStatusMapped: Counter<'route' | 'upstream_status' | 'status'>;
  readonly policyInfo: Gauge<'hash'>;
  readonly policyReloads: Counter<'result'>;
  readonly keyStoreUp: Gauge;
  readonly keyChangeNoticesUp: Gauge;
  readonly keyChangePropagation: Histogram;
  readonly rateLimited: Counter<'route'>;
  readonly rateLimitStoreErrors: Counter<'context'>;
  readonly rateLimitInstances: Gauge;
  /** Registered (and on /metrics) only with a shadow policy (POLICY_SHADOW_FILE). */
  readonly shadowDisagreements: Counter<'route' | 'enforced' | 'shadow'>;
}

/** Resolves sub-millisecond gateway overhead as well as multi-minute downloads. */
export const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** From a small JSON object to the largest max_bytes a route may declare (16 MiB). */
export const BODY_BUCKETS = [256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216];

/** From a notice on the same host (a millisecond) to one past the alert's second. */
const PROPAGATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The results a policy reload counts. */
const RELOAD_RESULTS = ['success', 'failure', 'unchanged'] as const;

const PREFIX = 'acquirer_gateway_';

/** `counter` with each of `series` present at 0 (see createMetrics). */
function atZero<L extends string>(counter: Counter<L>, series: readonly Partial<Record<L, string>>[]): Counter<L> {
  for (const labels of series) counter.inc(labels, 0);
  return counter;
}

/** Counted by whoever reads the policy file: the one process, or with WORKERS the primary. */
function policyReloadsCounter(registers: Registry[]): Counter<'result'> {
  const counter = new Counter({
    name: `${PREFIX}policy_reloads_total`,
    help: 'Policy reload attempts by result (success, failure, unchanged).',
    labelNames: ['result'],
    registers,
  });
  return atZero(counter, RELOAD_RESULTS.map((result) => ({ result })));
}

/**
 * The series the shipped alerts (examples/alerts.yml) watch with `rate` or `increase` exist at 0 from
 * the start: Prometheus sees nothing of a series' first increment when the series appears with it
 * (the first failed reload of a process would raise no alert).
 */
export function createMetrics({ shadow = false }: { shadow?: boolean } = {}): GatewayMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });
  const registers = [registry];
  const shadowDisagreements = new Counter({
    name: `${PREFIX}shadow_disagreements_total`,
    help: 'Requests the shadow policy (POLICY_SHADOW_FILE) judges otherwise than the enforced one, by route id, enforced and shadow verdict.',
    labelNames: ['route', 'enforced', 'shadow'],
    registers: shadow ? registers : [],
  });
  return { registry, ...requestMetrics(registers), ...upstreamMetrics(registers), ...stateMetrics(registers), shadowDisagreements };
}

/** Counted on every request. */
function requestMetrics(registers: Registry[]) {
  return {
    requests: new Counter({
      name: `${PREFIX}requests_total`,
      help: 'Requests answered, by policy route id (or "unmatched"), method and status.',
      labelNames: ['route', 'method', 'status'],
      registers,
    }),
    requestDuration: new Histogram({
      name: `${PREFIX}request_duration_seconds`,
      help: 'Time from request to the end of the response, by route.',
      labelNames: ['route'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    requestBodyBytes: new Histogram({
      name: `${PREFIX}request_body_bytes`,
      help: 'Size of each request body read whole and checked (passed or refused by the check), by route (routes that take one).',
      labelNames: ['route'],
      buckets: BODY_BUCKETS,
      registers,
    }),
    denials: new Counter({ name: `${PREFIX}denials_total`, help: 'Requests refused by the gateway, by reason.', labelNames: ['reason'], registers }),
    keyResolutions: new Counter({
      name: `${PREFIX}key_resolutions_total`,
      help: 'API key lookups by layer (memory, redis) and result (hit, negative_hit, coalesced, miss, error).',
      labelNames: ['layer', 'result'],
      registers,
    }),
    rateLimited: new Counter({
      name: `${PREFIX}rate_limited_total`,
      help: "Requests refused (429) because the key had used its route's rate, by route id.",
      labelNames: ['route'],
      registers,
    }),
    connectionsDropped: new Counter({
      name: `${PREFIX}connections_dropped_total`,
      help: 'Client connections closed as they were accepted, because MAX_CONNECTIONS were open.',
      registers,
    }),
  };
}

function upstreamMetrics(registers: Registry[]) {
  return {
    upstreamDuration: new Histogram({
      name: `${PREFIX}upstream_duration_seconds`,
      help: 'Time until the upstream answered with response headers, by route.',
      labelNames: ['route'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    upstreamErrors: atZero(
      new Counter({
        name: `${PREFIX}upstream_errors_total`,
        help: 'Upstream requests that failed, by kind (refused, reset, timeout, pool_exhausted, unresolvable, protocol, stalled, other).',
        labelNames: ['kind'],
        registers,
      }),
      UPSTREAM_ERROR_KINDS.map((kind) => ({ kind })),
    ),
    upstreamRetries: new Counter({
      name: `${PREFIX}upstream_retries_total`,
      help: 'GET/HEAD requests sent a second time because a pooled upstream connection failed before any answer.',
      registers,
    }),
    upstreamUnaskedBytes: new Counter({
      name: `${PREFIX}upstream_unasked_bytes_total`,
      help: 'Idle upstream connections closed because the upstream sent bytes on them: an answer to no request (a second answer to one request?).',
      registers,
    }),
    upstreamStatusMapped: new Counter({
      name: `${PREFIX}upstream_status_mapped_total`,
      help: 'Upstream error statuses replaced by a gateway error, by route, upstream status and status sent.',
      labelNames: ['route', 'upstream_status', 'status'],
      registers,
    }),
  };
}

/** What the gateway runs with: the policy and the key store. */
function stateMetrics(registers: Registry[]) {
  return {
    policyInfo: new Gauge({
      name: `${PREFIX}policy_info`,
      help: 'The loaded policy, by the SHA-256 of its file; always 1.',
      labelNames: ['hash'],
      registers,
      // Several workers (WORKERS): each reports the same policy; the primary shows it once.
      aggregator: 'max',
    }),
    // A worker's stays at 0: the primary reads the file and counts (createPrimaryMetrics).
    policyReloads: policyReloadsCounter(registers),
    keyStoreUp: new Gauge({
      name: `${PREFIX}key_store_up`,
      help: '1 while Redis answers key lookups, else 0.',
      registers,
      // Several workers: up only if every one is.
      aggregator: 'min',
    }),
    keyChangeNoticesUp: new Gauge({
      name: `${PREFIX}key_change_notices_up`,
      help: '1 while key change notices are subscribed, else 0 (cached verdicts are then trusted for 1 s only).',
      registers,
      aggregator: 'min',
    }),
    keyChangePropagation: new Histogram({
      name: `${PREFIX}key_change_propagation_seconds`,
      help: 'From a key change notice published (keys update, keys disable) to this process dropping its cached copy, by the two hosts\' clocks.',
      buckets: PROPAGATION_BUCKETS,
      registers,
    }),
    rateLimitStoreErrors: new Counter({
      name: `${PREFIX}rate_limit_store_errors_total`,
      help: 'Rate limit calls Redis did not answer, by context: "rate limit" (a request judged by RATE_LIMIT_FAIL), "instance count" (the last count stands) or "connection" (the connection for them failed).',
      labelNames: ['context'],
      registers,
    }),
    rateLimitInstances: new Gauge({
      name: `${PREFIX}rate_limit_instances`,
      help: 'Gateways live as this one last counted them (RATE_LIMIT_STORE=local, once a policy declares a rate): each lets a key through at its rate divided by this.',
      registers,
      // Several workers: each counts the whole fleet, itself and its siblings included.
      aggregator: 'max',
    }),
  };
}

/** The primary's own process metrics, beside the workers' combined `acquirer_gateway_process_*`. */
const PRIMARY_PREFIX = `${PREFIX}primary_`;

export interface PrimaryMetrics {
  /** The primary reads the policy file: its reloads are counted once, not once per worker. */
  readonly policyReloads: Counter<'result'>;
  /** Its metrics in prom-client's JSON shape, for the primary to add to the workers'. */
  collect(): Promise<MetricObjectWithValues<MetricValue<string>>[]>;
}

/**
 * With WORKERS above 1: the primary's policy reloads, and its own CPU, memory and descriptors (it
 * accepts every connection and hands it to a worker, so under load its CPU is worth watching on its
 * own). Its Node.js metrics are left out.
 */
export function createPrimaryMetrics(): PrimaryMetrics {
  const processRegistry = new Registry();
  collectDefaultMetrics({ register: processRegistry, prefix: PRIMARY_PREFIX });
  const policyRegistry = new Registry();
  const policyReloads = policyReloadsCounter([policyRegistry]);
  return {
    policyReloads,
    collect: async () => [
      ...(await processRegistry.getMetricsAsJSON()).filter((m) => m.name.startsWith(`${PRIMARY_PREFIX}process_`)),
      ...(await policyRegistry.getMetricsAsJSON()),
    ],
  };
}
