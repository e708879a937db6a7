import { PARAM_TYPES, type ParamTypeName } from './param-types.js';

/** One path segment of a template: a literal, or prefix + one typed parameter + suffix. */
export type Segment =
  | { readonly kind: 'literal'; readonly text: string }
  | {
      readonly kind: 'param';
      readonly prefix: string;
      readonly name: string;
      readonly type: ParamTypeName;
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
  return `${escapeRegex(segment.prefix)}(${PARAM_TYPES[segment.type].pattern})${escapeRegex(segment.suffix)}`;
}

/**
 * Parses a template such as `/v1/things/:id.csv`. Literals may use only unreserved characters
 * (RFC 3986), so no template can express an encoded, dotted or empty segment.
 */
export function compileTemplate(path: string, params: Readonly<Record<string, ParamTypeName>>): CompiledTemplate {
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
    const type = params[name];
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
    validators: segments.flatMap((s) => (s.kind === 'param' ? [(PARAM_TYPES[s.type] as { validate?: (v: string) => boolean }).validate] : [])),
  };
}

function segmentMatches(segment: Segment, text: string): boolean {
  if (segment.kind === 'literal') return segment.text === text;
  const match = new RegExp(`^${segmentPattern(segment)}$`).exec(text);
  if (!match) return false;
  const validate = (PARAM_TYPES[segment.type] as { validate?: (v: string) => boolean }).validate;
  return validate ? validate(match[1]!) : true;
}

function segmentSamples(segment: Segment): string[] {
  if (segment.kind === 'literal') return [segment.text];
  return PARAM_TYPES[segment.type].samples.map((sample) => segment.prefix + sample + segment.suffix);
}

/**
 * Strings both parameter segments might accept: the longer of the two prefixes, a sample of either
 * type, the longer of the two suffixes (e.g. `:a-x` and `y-:b` both accept `y-a-x`). Empty when
 * the prefixes or suffixes contradict each other, in which case no string can match both.
 */
function sharedSamples(a: Segment, b: Segment): string[] {
  if (a.kind !== 'param' || b.kind !== 'param') return [];
  const [shortPrefix, longPrefix] = a.prefix.length <= b.prefix.length ? [a.prefix, b.prefix] : [b.prefix, a.prefix];
  const [shortSuffix, longSuffix] = a.suffix.length <= b.suffix.length ? [a.suffix, b.suffix] : [b.suffix, a.suffix];
  if (!longPrefix.startsWith(shortPrefix) || !longSuffix.endsWith(shortSuffix)) return [];
  const samples = [...PARAM_TYPES[a.type].samples, ...PARAM_TYPES[b.type].samples];
  return samples.map((sample) => longPrefix + sample + longSuffix);
}

/**
 * A path both templates accept, or null when they are disjoint. Each position is probed with
 * representative values: literals against the other side's pattern, each type's samples (chosen to
 * hit every overlap between the built-in types) with their own and with the combined prefix and
 * suffix of both sides.
 */
export function overlappingPath(a: CompiledTemplate, b: CompiledTemplate): string | null {
  if (a.segments.length !== b.segments.length) return null;
  const witness: string[] = [];
  for (let i = 0; i < a.segments.length; i++) {
    const sa = a.segments[i]!;
    const sb = b.segments[i]!;
    const candidates = [...segmentSamples(sa), ...segmentSamples(sb), ...sharedSamples(sa, sb)];
    const shared = candidates.find((text) => segmentMatches(sa, text) && segmentMatches(sb, text));
    if (shared === undefined) return null;
    witness.push(shared);
  }
  return '/' + witness.join('/');
}
