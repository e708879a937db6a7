import { ERROR_CODES, type ErrorCode } from '../../errors/codes.js';
import { methodLabel } from './labels.js';
import type { GatewayMetrics } from './metrics.js';

/**
 * One answered request in the request metrics, wherever it was answered (the app, or the server's
 * edge before the app): its count by route, method and status, and a refusal's reason.
 */
export function countRequest(metrics: GatewayMetrics, route: string, method: string | undefined, status: number, code: ErrorCode | undefined): void {
  metrics.requests.inc({ route, method: methodLabel(method), status: String(status) });
  const definition = code === undefined ? undefined : ERROR_CODES[code];
  if (definition !== undefined && definition.status < 500) metrics.denials.inc({ reason: definition.reason });
}
