import { isErrorStatus, type ErrorStatus } from '../errors/codes.js';

/**
 * What an upstream error status becomes. Listed statuses follow the policy's map; any other error
 * status is answered with the gateway's own body for it (or 502 when the gateway has none), so no
 * upstream error page, header or stack trace ever reaches a client. Never a 401: the gateway's 401
 * tells a client its key is invalid, and the client's key never goes upstream, so an upstream 401 is
 * about the gateway's own standing there (502), whatever the policy's map lists.
 */
export function mapUpstreamStatus(status: number, statusMap: ReadonlyMap<number, ErrorStatus>): ErrorStatus | null {
  // A final status outside 2xx-5xx is not HTTP the client could use (and writeHead would throw).
  if (!Number.isInteger(status) || status < 200 || status > 599) return 502;
  if (status < 400) return null;
  return statusMap.get(status) ?? (isErrorStatus(status) && status !== NEVER_PASSED_ON ? status : 502);
}

/** The one error status an upstream's answer is never given: see mapUpstreamStatus. */
export const NEVER_PASSED_ON = 401;
