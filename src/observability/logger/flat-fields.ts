/**
 * @module
 * A record of one level (strings, numbers, booleans, nulls) as the fields of a JSON line, in one pass:
 * the bytes pino's walk and the scrub write for it, at a fraction of their cost. For the lines written
 * per request (the access line, the audit line), where pino's walk was the largest part of a write's
 * cost over the floor (docs/performance.md, "Written by hand where a library does the job").
 */
import { redactSecrets } from '../../secrets/redact.js';

/** Fields that could carry a secret whatever its shape, in any case: replaced whole, at any depth. */
// Tested, not lower-cased: that made a string per field and line. `u` folds as toLowerCase did (K, the Kelvin sign).
export const SECRET_FIELD = /^(?:authorization|key)$/iu;
export const CENSORED = '[redacted]';

/** A record of one level: strings, numbers, booleans and nulls only, so it serialises in one step. */
export type FlatRecord = Readonly<Record<string, string | number | boolean | null | undefined>>;

/** What JSON escapes, and anything beyond ASCII (left to JSON.stringify), in one regular expression. */
const NEEDS_ESCAPING = /[\u0000-\u001f"\\\u007f-\uffff]/;

/** A string as JSON: quoted as it is when it holds nothing JSON escapes (request ids, route ids, paths). */
export function jsonString(text: string): string {
  return NEEDS_ESCAPING.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** The digits after the point of 0 to 999 thousandths, as JavaScript prints them: trailing zeros dropped. */
const THOUSANDTHS = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0').replace(/0+$/, ''));
const THOUSANDTHS_LIMIT = 2 ** 31;

/**
 * A number as JSON writes it. A whole number of thousandths (the access line's milliseconds) is
 * written from its integer parts, exactly: V8's shortest-form printing of a fraction cost as much as
 * the rest of the line's numbers together.
 */
function jsonNumber(value: number): string {
  if (Number.isInteger(value) || !Number.isFinite(value)) return Number.isFinite(value) ? String(value) : 'null';
  const thousandths = Math.round(value * 1000);
  if (thousandths / 1000 !== value || Math.abs(thousandths) >= THOUSANDTHS_LIMIT) return String(value);
  const size = Math.abs(thousandths);
  return `${thousandths < 0 ? '-' : ''}${Math.floor(size / 1000)}.${THOUSANDTHS[size % 1000]!}`;
}

/** A field name, quoted for JSON and checked against SECRET_FIELD once, not on every line. */
type FieldName = { readonly quoted: string; readonly secret: boolean };
const fieldNames = new Map<string, FieldName>();

function fieldName(name: string): FieldName {
  let known = fieldNames.get(name);
  if (known === undefined) {
    known = { quoted: `${JSON.stringify(name)}:`, secret: SECRET_FIELD.test(name) };
    // Names come from the code, a few dozen; the bound only guards against a caller that made them up.
    if (fieldNames.size < 256) fieldNames.set(name, known);
  }
  return known;
}

/**
 * `record` as the fields of a JSON object (no braces): what `JSON.stringify` of the logger's scrub of
 * it writes. Every string is redacted like any other; a field SECRET_FIELD names is censored; a
 * number JSON cannot hold is null; an undefined field is left out.
 */
export function flatFields(record: FlatRecord): string {
  let text = '';
  for (const name in record) {
    const value = record[name];
    if (value === undefined) continue;
    const field = fieldName(name);
    let json: string;
    if (value === null) json = 'null';
    else if (field.secret) json = jsonString(CENSORED);
    else if (typeof value === 'string') json = jsonString(redactSecrets(value));
    else if (typeof value === 'number') json = jsonNumber(value);
    else json = value ? 'true' : 'false';
    text += text === '' ? field.quoted + json : `,${field.quoted}${json}`;
  }
  return text;
}
