/**
 * @module
 * Whether a route takes a request's query: judged by the names and values the upstream will read
 * (percent-decoding undone once, `+` a space, as form decoding does), while the query goes upstream
 * exactly as the client sent it.
 */
import type { CompiledRoute, QueryParam } from './compile.js';

/** Why a route refuses a query: the first pair, from the left, that it cannot take. */
export type QueryRefusal =
  /** A pair without `=` (an empty one, `a&&b`, included). */
  | { readonly kind: 'no_value'; readonly pair: string }
  /** A name or value that cannot be decoded: a `%` that is no escape, or bytes that are not UTF-8. */
  | { readonly kind: 'undecodable'; readonly raw: string }
  | { readonly kind: 'undeclared'; readonly name: string }
  | { readonly kind: 'bad_value'; readonly name: string; readonly value: string; readonly type: string }
  | { readonly kind: 'too_often'; readonly name: string; readonly maxCount: number };

/**
 * Whether the route takes a raw request-target's query: only its declared parameters, each as often
 * as declared (once unless repeatable), of the declared type; none without `query`, any with
 * `query: any` (docs/policy.md, "Queries").
 */
export function queryAllowed(route: CompiledRoute, target: string): boolean {
  return queryRefusal(route, target) === null;
}

/** What queryAllowed decides, with the reason: null when the route takes the query. */
export function queryRefusal(route: CompiledRoute, target: string): QueryRefusal | null {
  const declared = route.query;
  if (declared === undefined) return null;
  const q = target.indexOf('?');
  return q === -1 ? null : declaredQueryRefusal(declared, target.slice(q));
}

function declaredQueryRefusal(declared: ReadonlyMap<string, QueryParam>, query: string): QueryRefusal | null {
  if (query.length <= 1) return null; // a bare `?`
  const seen: string[] = [];
  for (const pair of query.slice(1).split('&')) {
    const eq = pair.indexOf('=');
    if (eq === -1) return { kind: 'no_value', pair };
    const name = decodeComponent(pair.slice(0, eq));
    if (name === null) return { kind: 'undecodable', raw: pair.slice(0, eq) };
    const param = declared.get(name);
    if (param === undefined) return { kind: 'undeclared', name };
    const value = decodeComponent(pair.slice(eq + 1));
    if (value === null) return { kind: 'undecodable', raw: pair.slice(eq + 1) };
    if (!param.accepts(value)) return { kind: 'bad_value', name, value, type: param.type.text };
    seen.push(name);
    if (count(seen, name) > param.type.maxCount) return { kind: 'too_often', name, maxCount: param.type.maxCount };
  }
  return null;
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

/** Why a query is refused, in words (`policy explain`). */
export function describeQueryRefusal(refusal: QueryRefusal): string {
  switch (refusal.kind) {
    case 'no_value':
      return refusal.pair === '' ? 'an empty pair (`&&`, or `&` at an end)' : `${JSON.stringify(refusal.pair)} has no "=": each parameter is name=value`;
    case 'undecodable':
      return `${JSON.stringify(refusal.raw)} cannot be decoded: a % that is no escape, or bytes that are not UTF-8`;
    case 'undeclared':
      return `${refusal.name} is not a parameter of the route`;
    case 'bad_value':
      return `${refusal.name}: ${JSON.stringify(refusal.value)} is not ${refusal.type}`;
    case 'too_often':
      return `${refusal.name} is given more than ${refusal.maxCount === 1 ? 'once' : `${refusal.maxCount} times`}`;
  }
}
