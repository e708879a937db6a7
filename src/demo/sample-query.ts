/**
 * @module
 * Reading the query the gateway forwards. It forwards the text exactly as the client sent it, so a
 * bracketed name may arrive as `sort[field]` or as `sort%5Bfield%5D`: both are read as the same name.
 */
import { invalid } from './sample-http.js';

/**
 * Each name's first value, names and values decoded after splitting on `&` and `=` (`+` is a space,
 * as in a form). An escape that does not decode is kept as written, as URLSearchParams keeps it.
 */
export function parseQuery(query: string): ReadonlyMap<string, string> {
  const params = new Map<string, string>();
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const at = pair.indexOf('=');
    const [name, value] = at === -1 ? [pair, ''] : [pair.slice(0, at), pair.slice(at + 1)];
    const decodedName = decodeComponent(name);
    if (!params.has(decodedName)) params.set(decodedName, decodeComponent(value));
  }
  return params;
}

function decodeComponent(text: string): string {
  const spaced = text.replaceAll('+', ' ');
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/** `name`'s value as an integer from `min` to `max`, `fallback` when absent; anything else is a 422. */
export function integerParam(params: ReadonlyMap<string, string>, name: string, { min, max = Number.MAX_SAFE_INTEGER, fallback }: { min: number; max?: number; fallback: number }): number {
  const text = params.get(name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min || value > max) {
    throw invalid({ [name]: [max === Number.MAX_SAFE_INTEGER ? `must be an integer of at least ${min}` : `must be an integer from ${min} to ${max}`] });
  }
  return value;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
// A '+' the client left unencoded in an offset arrives as a space: it is read as the '+' meant.
const DATE_TIME = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(:\d{2})?(\.\d{1,9})?(?:([Zz])|([+\- ])(\d{2}):?(\d{2}))$/;

/**
 * `name`'s value as an instant (milliseconds), `undefined` when absent: an ISO 8601 date-time with a
 * zone, or a date alone, which is that day's start in UTC. Anything else is a 422.
 */
export function instantParam(params: ReadonlyMap<string, string>, name: string): number | undefined {
  const text = params.get(name);
  if (text === undefined) return undefined;
  const instant = Date.parse(DATE.test(text) ? `${text}T00:00:00Z` : canonicalDateTime(text));
  if (Number.isNaN(instant)) throw invalid({ [name]: ['must be an ISO 8601 date or date-time'] });
  return instant;
}

/** The one spelling Date.parse reads for sure (seconds, milliseconds, `Z` or `±hh:mm`), or '' when it is none. */
function canonicalDateTime(text: string): string {
  const m = DATE_TIME.exec(text);
  if (!m) return '';
  const [, minutes, seconds = ':00', fraction = '.000', utc, sign, hours, mins] = m;
  const zone = utc ? 'Z' : `${sign === '-' ? '-' : '+'}${hours}:${mins}`;
  return `${minutes}${seconds}${fraction.slice(0, 4).padEnd(4, '0')}${zone}`;
}
