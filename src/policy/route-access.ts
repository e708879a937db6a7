/**
 * @module
 * Whether a key's permissions let it call a route: the one decision the permissions step, `policy
 * explain` and `policy impact` all make.
 */

const NONE: readonly string[] = Object.freeze([]);

/**
 * The route's required permissions the key does not carry, in the route's order; empty when it may
 * call the route (all are required; a route that requires none takes any valid key).
 * @example missingPermissions(new Set(['eod_list']), ['eod_list', 'eod_read']) // ['eod_read']
 */
export function missingPermissions(granted: ReadonlySet<string>, required: readonly string[]): readonly string[] {
  for (const name of required) {
    // Listed only once one is missing: a key that may call the route costs no array.
    if (!granted.has(name)) return required.filter((p) => !granted.has(p));
  }
  return NONE;
}
