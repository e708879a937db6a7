import { isErrorStatus, type ErrorStatus } from './codes.js';

/**
 * What an upstream error status becomes: the policy's map, else the gateway's own body for it (502
 * when it has none), so no upstream error page reaches a client. An upstream 401 is always a 502: it
 * is about the gateway's standing upstream, not the client's key (docs/request-handling.md).
 */
export function mapUpstreamStatus(status: number, statusMap: ReadonlyMap<number, ErrorStatus>): ErrorStatus | null {
  // A final status outside 2xx-5xx is not HTTP the client could use (and writeHead would throw).
  if (!Number.isInteger(status) || status < 200 || status > 599) return 502;
  if (status < 400) return null;
  if (status === NEVER_PASSED_ON) return 502;
  return statusMap.get(status) ?? (isErrorStatus(status) && !GATEWAY_OWN.has(status) ? status : 502);
}

/**
 * Error statuses the gateway answers about a client's own standing with it, never for the upstream
 * unless the policy's map says so: an upstream 429 is about the gateway's own standing upstream
 * (every acquirer reaches it as one client), not the acquirer's share of the gateway; an upstream
 * 408 is about the gateway's own request, which it sent whole.
 */
const GATEWAY_OWN: ReadonlySet<number> = new Set([408, 429]);

/** The one error status an upstream's answer is never given, and never passed on as: see mapUpstreamStatus. */
export const NEVER_PASSED_ON = 401;

/** Upstream statuses whose JSON body reaches the client (proxy/error-body.ts), unless the policy's map lists them. */
export const EXPLAINED_STATUSES: ReadonlySet<number> = new Set([400, 422]);
