import type { CompiledPolicy, CompiledRoute } from './compile.js';

export type RouteMatch =
  /** The route whose method and path these are. Whether it takes the query is judged apart (match-query.ts). */
  | { readonly kind: 'matched'; readonly route: CompiledRoute; readonly path: string; readonly query: string }
  | { readonly kind: 'non_canonical' }
  | { readonly kind: 'not_found' };

/**
 * Characters allowed in a path segment: RFC 3986 unreserved plus sub-delims that carry no
 * structure for common servers. Absent on purpose: "%" (no encoded forms), ";" (path parameters),
 * "\" and everything outside visible ASCII.
 */
const CANONICAL_PATH = /^(?:\/[A-Za-z0-9\-._~!$&'()*+,=:@]+)+$/;
const DOT_SEGMENT = /\/\.{1,2}(?:\/|$)/;
/** The query goes upstream unchanged, so it may hold only visible ASCII and no fragment. */
const SAFE_QUERY = /^[\x21-\x22\x24-\x7e]*$/;

/** Splits a raw request-target and checks it is origin-form and canonical. */
export function splitTarget(target: string): { path: string; query: string } | null {
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? '' : target.slice(q);
  if (path !== '/' && (!CANONICAL_PATH.test(path) || DOT_SEGMENT.test(path))) return null;
  if (query !== '' && !SAFE_QUERY.test(query.slice(1))) return null;
  return { path, query };
}

/**
 * Finds the route for a method and raw request-target. Pure: the target is judged exactly as it
 * arrived, never decoded or normalised, so the string matched is the string forwarded.
 */
export function matchRoute(policy: CompiledPolicy, method: string, target: string): RouteMatch {
  const split = splitTarget(target);
  if (split === null) return { kind: 'non_canonical' };
  const candidates = policy.routesByMethod.get(method);
  if (candidates === undefined) return { kind: 'not_found' };
  for (const route of candidates) {
    const match = route.template.regex.exec(split.path);
    if (match === null) continue;
    const validators = route.template.validators;
    let valid = true;
    for (let i = 0; i < validators.length; i++) {
      const validate = validators[i];
      if (validate !== undefined && !validate(match[i + 1]!)) valid = false;
    }
    if (!valid) continue;
    return { kind: 'matched', route, path: split.path, query: split.query };
  }
  return { kind: 'not_found' };
}
