import { isErrorStatus, type ErrorStatus } from './codes.js';

/**
 * What an upstream error status becomes. Listed statuses follow the policy's map; any other error
 * status is answered with the gateway's own body for it (or 502 when the gateway has none), so no
 * upstream error page, header or stack trace ever reaches a client. An upstream 401 is always a 502:
 * the client's key never goes upstream, so it is about the gateway's own standing there, and the
 * gateway's 401 (the client's key is invalid) would send the client to rotate a key that works. The
 * policy's map can say neither otherwise (compile.ts refuses it).
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
 * (every acquirer reaches it as one client), not the acquirer's share of the gateway.
 */
const GATEWAY_OWN: ReadonlySet<number> = new Set([429]);

/** The one error status an upstream's answer is never given, and never passed on as: see mapUpstreamStatus. */
export const NEVER_PASSED_ON = 401;
