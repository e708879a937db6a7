/**
 * @module
 * Whether a route takes a request's query: judged by the names and values the upstream will read
 * (percent-decoding undone once, `+` a space, as form decoding does), while the query goes upstream
 * exactly as the client sent it.
 */
import type { CompiledRoute, QueryParam } from './compile.js';

/**
 * Whether the route takes a raw request-target's query: only its declared parameters, each as often
 * as declared (once unless repeatable), of the declared type; none without `query`, any with
 * `query: any` (docs/policy.md, "Queries").
 */
export function queryAllowed(route: CompiledRoute, target: string): boolean {
  const declared = route.query;
  if (declared === undefined) return true;
  const q = target.indexOf('?');
  return q === -1 || declaredQueryAllowed(declared, target.slice(q));
}

function declaredQueryAllowed(declared: ReadonlyMap<string, QueryParam>, query: string): boolean {
  if (query.length <= 1) return true; // a bare `?`
  const seen: string[] = [];
  for (const pair of query.slice(1).split('&')) {
    const eq = pair.indexOf('=');
    if (eq === -1) return false;
    const name = decodeComponent(pair.slice(0, eq));
    const param = name === null ? undefined : declared.get(name);
    if (param === undefined) return false;
    const value = decodeComponent(pair.slice(eq + 1));
    if (value === null || !param.accepts(value)) return false;
    seen.push(name!);
    if (count(seen, name!) > param.type.maxCount) return false;
  }
  return true;
}

function count(names: readonly string[], name: string): number {
  let n = 0;
  for (const seen of names) if (seen === name) n++;
  return n;
}

/**
 * A name or value as a form decoder reads it (Rack, Express's `qs`, Python's `parse_qs`): `+` is a
 * space, `%XX` a byte, the bytes UTF-8. null when it cannot be read so (a stray `%`, bytes that are
 * not UTF-8): the gateway cannot know what the upstream would make of it.
 */
export function decodeComponent(raw: string): string | null {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return null;
  }
}
