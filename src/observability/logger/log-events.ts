/**
 * @module
 * Every log line the gateway writes, by its stable `event` name: the level it is written at and its
 * message. Tests and log queries match `event`, never the message, which is for people and may be
 * reworded. docs/operations.md lists them; a test keeps the two equal.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info';

export interface LogEventDefinition {
  readonly level: LogLevel;
  readonly msg: string;
  /** When the level depends on the line, as docs/operations.md says it. */
  readonly levels?: string;
}

const event = (level: LogLevel, msg: string, levels?: string): LogEventDefinition => (levels === undefined ? { level, msg } : { level, msg, levels });

export const LOG_EVENTS = {
  // Requests
  request: event('info', 'request', 'info; warn for a 5xx or an answer that never completed'),
  audit: event('info', 'a request with a method that changes something (any but GET and HEAD)'),
  request_failed: event('error', 'request failed'),
  unexpected_error: event('error', 'unexpected error'),
  pipelining_limit: event('warn', 'a connection pipelined more requests than the limit ahead of their answers: closed'),
  connections_dropped: event('warn', 'client connections past MAX_CONNECTIONS closed as they were accepted'),
  // The upstream
  upstream_request_failed: event('warn', 'upstream request failed'),
  upstream_stalled: event('warn', 'a streaming answer stalled: connections cut'),
  upstream_retried: event('warn', 'a pooled upstream connection failed before any answer (closed by the upstream as it was reused): sent again on a new one'),
  upstream_bytes_after_answer: event('warn', 'the upstream sent bytes after a complete answer: its connection was closed'),
  upstream_unasked_bytes: event('error', 'the upstream sent bytes on an idle connection, an answer to no request; the connection was closed'),
  // Keys
  key_store_problem: event('warn', 'key store problem'),
  // Rate limits
  rate_limit_store_problem: event('warn', 'rate limits: Redis did not answer (RATE_LIMIT_FAIL says what a request is told)'),
  // The policy
  policy_reloaded: event('info', 'policy reloaded'),
  policy_reload_refused: event('error', 'policy reload refused; the running policy stays'),
  policy_watch_failed: event('error', 'policy file watch failed; reload with SIGHUP'),
  policy_applied: event('info', 'policy applied'),
  policy_not_applied: event('error', "the primary's policy could not be compiled here; the running policy stays"),
  shadow_disagreement: event('info', 'the shadow policy judges a request otherwise than the enforced one (at most one line a second per route and verdicts)'),
  shadow_policy_reloaded: event('info', 'shadow policy reloaded'),
  shadow_policy_refused: event('error', 'shadow policy reload refused; the running shadow stays'),
  shadow_policy_applied: event('info', 'shadow policy applied'),
  shadow_policy_not_applied: event('error', "the primary's shadow policy could not be compiled here; the running shadow stays"),
  // The process
  setting_retired: event('warn', 'a setting that no longer exists is set: it is ignored'),
  listening: event('info', 'listening'),
  worker_listening: event('info', 'worker listening'),
  expose_gc_missing: event('warn', "node runs without --expose-gc (the flags of dist/cli.js's shebang): large downloads will hold tens of MiB more memory"),
  signal_received: event('info', 'signal received'),
  second_signal: event('warn', 'second signal: exiting now'),
  shutting_down: event('info', 'shutting down: draining requests in flight'),
  shutdown_deadline_passed: event('warn', 'shutdown deadline passed: closing the connections still open'),
  shutdown_failed: event('error', 'shutdown failed'),
  stopped: event('info', 'stopped'),
  unhandled_rejection: event('error', 'unhandled rejection'),
  uncaught_exception: event('fatal', 'uncaught exception: exiting'),
  // WORKERS: the primary
  workers_shutting_down: event('info', 'shutting down: every worker drains its requests'),
  workers_killed_at_deadline: event('warn', 'workers still running past the shutdown deadline: killing them'),
  worker_channel_error: event('warn', 'worker channel error'),
  worker_unresponsive: event('error', 'a worker stopped answering: killed, to be replaced'),
  worker_start_timeout: event('error', 'a worker did not start in time: killed'),
  worker_died_soon: event('error', 'worker died soon after it started: replacing it after a pause'),
  worker_replaced: event('error', 'worker died: replaced'),
  replacement_failed: event('error', 'a replacement worker could not start (its error is above): the others keep serving; trying again after a pause'),
  no_worker_serving: event('fatal', 'a replacement worker could not start and no worker is serving: stopping'),
  worker_sums_lost: event('warn', "a dead worker's counters could not be kept in the sums"),
} as const satisfies Record<string, LogEventDefinition>;

export type LogEvent = keyof typeof LOG_EVENTS;

/** The events as docs/operations.md lists them (`npm run docs` writes the table; a test keeps it current). */
export function renderLogEvents(): string {
  const rows = Object.entries(LOG_EVENTS).map(([name, def]: [string, LogEventDefinition]) => `| \`${name}\` | ${def.levels ?? def.level} | ${def.msg.replaceAll('|', '\\|')} |`);
  return ['| event | level | message |', '|---|---|---|', ...rows].join('\n');
}
