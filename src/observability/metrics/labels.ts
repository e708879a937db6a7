/**
 * @module
 * Label values that come from requests, mapped onto closed sets so that no client can grow the
 * number of series: the route label for requests no route matched, and the method label.
 */

/** Route label for requests no route matched (unknown, non-canonical, refused before routing). */
export const UNMATCHED_ROUTE = 'unmatched';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Method label: a client may send any token as a method; anything unusual shares one value. */
export function methodLabel(method: string | undefined): string {
  return method !== undefined && KNOWN_METHODS.has(method) ? method : 'OTHER';
}
