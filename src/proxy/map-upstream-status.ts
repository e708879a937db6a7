import { isErrorStatus, type ErrorStatus } from '../errors/codes.js';

/**
 * What an upstream error status becomes. Listed statuses follow the policy's map; any other error
 * status is answered with the gateway's own body for it (or 502 when the gateway has none), so no
 * upstream error page, header or stack trace ever reaches a client.
 */
export function mapUpstreamStatus(status: number, statusMap: ReadonlyMap<number, ErrorStatus>): ErrorStatus | null {
  // A final status outside 2xx-5xx is not HTTP the client could use (and writeHead would throw).
  if (!Number.isInteger(status) || status < 200 || status > 599) return 502;
  if (status < 400) return null;
  return statusMap.get(status) ?? (isErrorStatus(status) ? status : 502);
}
