import { getIntersectionWordSets, JS, NFA } from 'refa';
import type { ValueType } from './value-types.js';

/** One path segment of a template: a literal, or prefix + one typed parameter + suffix. */
export type Segment =
  | { readonly kind: 'literal'; readonly text: string }
  | {
      readonly kind: 'param';
      readonly prefix: string;
      readonly name: string;
      readonly type: ValueType;
      readonly suffix: string;
    };

export interface CompiledTemplate {
  readonly segments: readonly Segment[];
  /** Anchored regular expression for the whole path; group i is parameter i. */
  readonly regex: RegExp;
  readonly paramNames: readonly string[];
  readonly validators: readonly (((value: string) => boolean) | undefined)[];
}

const LITERAL = /^[A-Za-z0-9._~-]*$/;
const PARAM_TOKEN = /:([a-z_][a-z0-9_]*)/g;

export class TemplateError extends Error {}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function segmentPattern(segment: Segment): string {
  if (segment.kind === 'literal') return escapeRegex(segment.text);
  return `${escapeRegex(segment.prefix)}(${segment.type.pattern})${escapeRegex(segment.suffix)}`;
}

/**
 * Parses a template such as `/v1/things/:id.csv`. Literals may use only unreserved characters
 * (RFC 3986), so no template can express an encoded, dotted or empty segment.
 */
export function compileTemplate(path: string, params: Readonly<Record<string, ValueType>>): CompiledTemplate {
  if (!path.startsWith('/')) throw new TemplateError('must start with "/"');
  if (path.length > 1 && path.endsWith('/')) throw new TemplateError('must not end with "/"');
  const segments: Segment[] = [];
  const paramNames: string[] = [];
  for (const raw of path.slice(1).split('/')) {
    if (raw === '') throw new TemplateError('has an empty segment');
    const tokens = [...raw.matchAll(PARAM_TOKEN)];
    if (tokens.length > 1) throw new TemplateError(`segment "${raw}" has more than one parameter`);
    const token = tokens[0];
    if (!token) {
      if (!LITERAL.test(raw)) throw new TemplateError(`segment "${raw}" has a character outside A-Z a-z 0-9 . _ ~ -`);
      if (raw === '.' || raw === '..') throw new TemplateError(`segment "${raw}" is a dot segment`);
      segments.push({ kind: 'literal', text: raw });
      continue;
    }
    const name = token[1]!;
    const prefix = raw.slice(0, token.index);
    const suffix = raw.slice(token.index + token[0].length);
    if (!LITERAL.test(prefix) || !LITERAL.test(suffix)) {
      throw new TemplateError(`segment "${raw}" has a character outside A-Z a-z 0-9 . _ ~ -`);
    }
    // Own names only: `:constructor` would find Object's own.
    const type = Object.hasOwn(params, name) ? params[name] : undefined;
    if (!type) throw new TemplateError(`parameter :${name} has no type in params`);
    if (paramNames.includes(name)) throw new TemplateError(`parameter :${name} appears twice`);
    paramNames.push(name);
    segments.push({ kind: 'param', prefix, name, type, suffix });
  }
  for (const name of Object.keys(params)) {
    if (!paramNames.includes(name)) throw new TemplateError(`params declares "${name}", which the path does not use`);
  }
  const pattern = path === '/' ? '/' : segments.map((s) => '/' + segmentPattern(s)).join('');
  return {
    segments,
    regex: new RegExp(`^${pattern}$`),
    paramNames,
    validators: segments.flatMap((s) => (s.kind === 'param' ? [s.type.validate] : [])),
  };
}

/** Each template's automaton, built once however many routes it is compared with. */
const automata = new WeakMap<CompiledTemplate, NFA>();

function automaton(template: CompiledTemplate): NFA {
  let nfa = automata.get(template);
  if (nfa === undefined) {
    // refa works on unanchored expressions; the template's regex is anchored at both ends.
    const { expression, maxCharacter } = JS.Parser.fromLiteral(new RegExp(template.regex.source.slice(1, -1))).parse();
    nfa = NFA.fromRegex(expression, { maxCharacter });
    automata.set(template, nfa);
  }
  return nfa;
}

/**
 * True when no segment can match both: two different literals, a literal its counterpart's
 * pattern refuses, or two parameters' prefixes or suffixes that differ. Neither a literal nor a parameter's pattern holds a "/", so a path matches a
 * template segment by segment, and one such pair rules out every path. Settles nearly every pair of
 * routes without the automata (comparing every route with every other that way made a policy of a
 * few hundred routes take seconds to load).
 */
function segmentsExclude(a: CompiledTemplate, b: CompiledTemplate): boolean {
  for (let i = 0; i < a.segments.length; i++) {
    const x = a.segments[i]!;
    const y = b.segments[i]!;
    if (x.kind === 'literal' && y.kind === 'literal') {
      if (x.text !== y.text) return true;
    } else if (x.kind === 'literal') {
      if (!segmentRegex(y).test(x.text)) return true;
    } else if (y.kind === 'literal') {
      if (!segmentRegex(x).test(y.text)) return true;
    } else if (!(x.prefix.startsWith(y.prefix) || y.prefix.startsWith(x.prefix)) || !(x.suffix.endsWith(y.suffix) || y.suffix.endsWith(x.suffix))) {
      // Two parameters: a segment both match begins with both prefixes and ends with both suffixes,
      // so of each pair one holds the other (`:id.csv` and `:id.pdf` never meet).
      return true;
    }
  }
  return false;
}

const segmentRegexes = new WeakMap<Segment, RegExp>();
function segmentRegex(segment: Segment): RegExp {
  let regex = segmentRegexes.get(segment);
  if (regex === undefined) segmentRegexes.set(segment, (regex = new RegExp(`^${segmentPattern(segment)}$`)));
  return regex;
}

/**
 * The shortest path both templates accept, or null when no path can match both: an exact
 * intersection of the two patterns as finite automata, not a guess from sample values. Calendar
 * validity of dates is not modelled, so two routes that overlap only on impossible dates are still
 * reported; that errs on the side of refusing a policy.
 */
export function overlappingPath(a: CompiledTemplate, b: CompiledTemplate): string | null {
  if (a.segments.length !== b.segments.length || segmentsExclude(a, b)) return null;
  let first: string | null = null;
  let sets = 0;
  for (const wordSet of getIntersectionWordSets(automaton(a), automaton(b))) {
    // Each word set stands for many paths; prefer one a reader recognises as real (a valid date
    // rather than 0000-00-00), picked deterministically.
    for (let pick = 0; pick < PICKS_PER_SET; pick++) {
      const random = mulberry32(pick);
      // The first pick is the smallest character everywhere (00000000-0000-…); then pseudo-random ones.
      const path = String.fromCharCode(...wordSet.map((chars) => nthChar(chars.ranges, pick === 0 ? 0 : random())));
      first ??= path;
      if (templateMatches(a, path) && templateMatches(b, path)) return path;
    }
    if (++sets >= MAX_WORD_SETS) break;
  }
  return first;
}

const PICKS_PER_SET = 256;

/** A tiny seeded PRNG, so the example in an error message is the same on every run. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}
const MAX_WORD_SETS = 200;

/** The n-th character (modulo the set's size) of a set of character ranges. */
function nthChar(ranges: readonly { min: number; max: number }[], n: number): number {
  const size = ranges.reduce((sum, r) => sum + r.max - r.min + 1, 0);
  let index = n % size;
  for (const r of ranges) {
    const width = r.max - r.min + 1;
    if (index < width) return r.min + index;
    index -= width;
  }
  return ranges[0]!.min;
}

/** Whether a path matches the template, type checks included. */
export function templateMatches(template: CompiledTemplate, path: string): boolean {
  const match = template.regex.exec(path);
  if (match === null) return false;
  return template.validators.every((validate, i) => validate === undefined || validate(match[i + 1]!));
}
