/**
 * @module
 * What a path parameter or a query parameter takes, as the policy declares it: a named type
 * (param-types.ts), or a bounded integer, an enumeration, a string of a stated alphabet and length;
 * a query parameter may be repeatable up to a count. Compiled once into a pattern and a check.
 */
import { PARAM_TYPES, takesAllOf, type ParamType, type ParamTypeName } from './param-types.js';

/** The alphabets a declared string may use; each excludes what a query or path would need encoded to carry structure. */
export const ALPHABETS = {
  token: { chars: 'A-Za-z0-9_-', description: 'A-Z a-z 0-9 _ -' },
  dotted: { chars: 'A-Za-z0-9_.-', description: 'A-Z a-z 0-9 _ . -' },
  email: { chars: 'A-Za-z0-9_.+@-', description: 'A-Z a-z 0-9 _ . + @ -' },
} as const;
export type AlphabetName = keyof typeof ALPHABETS;

/** Alphabets whose characters are all another's, for policy diff. */
const ALPHABET_WITHIN: Readonly<Record<AlphabetName, readonly AlphabetName[]>> = { token: ['dotted', 'email'], dotted: ['email'], email: [] };

/** A value spec as written in the policy (schema.ts checks its shape). */
export type ValueSpec =
  | ParamTypeName
  | { readonly type: ParamTypeName; readonly min?: number | undefined; readonly max?: number | undefined; readonly max_count?: number | undefined }
  | { readonly type: 'enum'; readonly values: readonly string[]; readonly max_count?: number | undefined }
  | { readonly type: 'string'; readonly alphabet: AlphabetName; readonly max_length: number; readonly max_count?: number | undefined };

type Shape =
  | { readonly kind: 'named'; readonly name: ParamTypeName }
  | { readonly kind: 'integer'; readonly min: number; readonly max: number }
  | { readonly kind: 'enum'; readonly values: readonly string[] }
  | { readonly kind: 'string'; readonly alphabet: AlphabetName; readonly maxLength: number };

/** A declared value, compiled. */
export interface ValueType {
  /** As a reviewer reads it, in `policy routes` and `policy diff`: `uuid`, `integer 1..100`, `enum asc/desc`. */
  readonly text: string;
  /** Regular expression source for one value: no anchors, no capture groups. */
  readonly pattern: string;
  /** The check a pattern cannot make (a calendar, integer bounds); undefined when the pattern is all. */
  readonly validate: ((value: string) => boolean) | undefined;
  /** How often a query may give it: 1 unless declared repeatable. */
  readonly maxCount: number;
  readonly shape: Shape;
}

/** The integers `integer` and `positive_integer` take: at most 18 digits. */
const INTEGER_LIMIT = 999_999_999_999_999_999;

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Whether a decimal integer (as the integer pattern takes it) lies within bounds, exactly, whatever its length. */
function withinBounds(min: number, max: number): (value: string) => boolean {
  return (value) => {
    const n = value.length > 15 ? BigInt(value) : Number(value);
    return n >= min && n <= max;
  };
}

/** Compiles a declared value; its shape was checked by the schema. */
export function compileValueType(spec: ValueSpec): ValueType {
  const declared = typeof spec === 'string' ? { type: spec } : spec;
  const maxCount = declared.max_count ?? 1;
  const repeat = maxCount > 1 ? ` (up to ${maxCount} times)` : '';
  if (declared.type === 'enum') {
    const values = declared.values;
    return { text: `enum ${values.join('/')}${repeat}`, pattern: `(?:${values.map(escapeRegex).join('|')})`, validate: undefined, maxCount, shape: { kind: 'enum', values } };
  }
  if (declared.type === 'string') {
    const { alphabet, max_length: maxLength } = declared;
    const text = `string ${alphabet} ≤ ${maxLength}${repeat}`;
    return { text, pattern: `[${ALPHABETS[alphabet].chars}]{1,${maxLength}}`, validate: undefined, maxCount, shape: { kind: 'string', alphabet, maxLength } };
  }
  const named = PARAM_TYPES[declared.type] as ParamType;
  if ('min' in declared || 'max' in declared) {
    const min = declared.min ?? (declared.type === 'positive_integer' ? 1 : 0);
    const max = declared.max ?? INTEGER_LIMIT;
    const text = (max === INTEGER_LIMIT ? `integer ≥ ${min}` : `integer ${min}..${max}`) + repeat;
    return { text, pattern: named.pattern, validate: withinBounds(min, max), maxCount, shape: { kind: 'integer', min, max } };
  }
  return { text: declared.type + repeat, pattern: named.pattern, validate: named.validate, maxCount, shape: { kind: 'named', name: declared.type } };
}

/** A whole-value check for a compiled type. */
export function valueCheck(type: ValueType): (value: string) => boolean {
  const whole = new RegExp(`^${type.pattern}$`);
  const validate = type.validate;
  return validate === undefined ? (value) => whole.test(value) : (value) => whole.test(value) && validate(value);
}

/** The integer range a shape takes, when it is an integer type. */
function integerRange(shape: Shape): { min: number; max: number } | null {
  if (shape.kind === 'integer') return shape;
  if (shape.kind === 'named' && shape.name === 'integer') return { min: 0, max: INTEGER_LIMIT };
  if (shape.kind === 'named' && shape.name === 'positive_integer') return { min: 1, max: INTEGER_LIMIT };
  return null;
}

/**
 * Whether every value (and count) `narrower` takes, `wider` takes too, as far as can be shown without
 * enumerating values; false when not shown, so that `policy diff` asks a reviewer to look.
 */
export function valueTakesAllOf(wider: ValueType, narrower: ValueType): boolean {
  if (narrower.maxCount > wider.maxCount) return false;
  const [w, n] = [wider.shape, narrower.shape];
  if (n.kind === 'enum') return n.values.every(valueCheck(wider));
  const [wRange, nRange] = [integerRange(w), integerRange(n)];
  if (wRange !== null && nRange !== null) return wRange.min <= nRange.min && wRange.max >= nRange.max;
  if (w.kind === 'string' && n.kind === 'string') {
    return w.maxLength >= n.maxLength && (w.alphabet === n.alphabet || ALPHABET_WITHIN[n.alphabet].includes(w.alphabet));
  }
  if (w.kind === 'named' && n.kind === 'named') return takesAllOf(w.name, n.name);
  if (w.kind === 'named' && nRange !== null) return takesAllOf(w.name, 'integer');
  return false;
}
