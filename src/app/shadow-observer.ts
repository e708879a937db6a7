/**
 * @module
 * POLICY_SHADOW_FILE: each request with a valid key, once the enforced pipeline has answered it, is
 * judged again by the shadow policy (policy/shadow.ts); a different verdict is counted and logged.
 * Nothing here changes or delays an answer: it runs when the response is over.
 */
import { lineThrottle } from '../observability/line-throttle.js';
import type { Logger } from '../observability/logger/logger.js';
import { methodLabel } from '../observability/metrics/labels.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { enforcedVerdict, judgeByPolicy } from '../policy/shadow.js';

/** Route label when neither policy matched the request: never so for a disagreement today (one of them routed it), kept for the type. */
export const NO_ROUTE = 'none';

/** At most one `shadow_disagreement` line this often per route and pair of verdicts. */
export const SHADOW_LOG_EVERY_MS = 1_000;

export interface ShadowObserverDeps {
  /** The shadow policy now (it reloads as the enforced one does). */
  readonly shadow: () => CompiledPolicy;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** Milliseconds on a monotonic clock (tests). */
  readonly now?: () => number;
}

/** Judges one finished request: its method, raw request-target and locals. */
export type ShadowObserver = (method: string, target: string, locals: Express.Locals) => void;

/**
 * Builds the judge the request observer calls when a response is over; with no shadow policy it is
 * not built, and the request path does nothing more.
 * @example createShadowObserver({ shadow: () => candidate, metrics, logger })('GET', '/v1/acquirer/eod_statements', res.locals)
 */
export function createShadowObserver({ shadow, metrics, logger, now }: ShadowObserverDeps): ShadowObserver {
  const throttle = lineThrottle(SHADOW_LOG_EVERY_MS, now === undefined ? {} : { now });
  return function judgeInShadow(method, target, locals) {
    // An unknown or disabled key is refused alike by both policies.
    const key = locals.key;
    if (key === undefined) return;
    const enforced = enforcedVerdict(locals.errorCode, locals.route !== undefined);
    if (enforced === null) return;
    const judged = judgeByPolicy(shadow(), method, target, key.permissions);
    if (judged.verdict === enforced) return;
    const route = locals.route?.id ?? judged.route?.id ?? NO_ROUTE;
    metrics.shadowDisagreements.inc({ route, enforced, shadow: judged.verdict });
    const heldBack = throttle(`${route}\u0000${enforced}\u0000${judged.verdict}`);
    if (heldBack === null) return;
    const leftOut = heldBack.count > 0 ? { same_lines_unwritten: heldBack.count, unwritten_after_ms_ago: heldBack.lastWrittenMsAgo } : {};
    logger.event('shadow_disagreement', { key_id: key.id, acquirer_id: key.acquirerId, route, method: methodLabel(method), enforced, shadow: judged.verdict, ...leftOut });
  };
}
