import { percentDecode } from '../net/percent-decoding.js';

/**
 * Anything shaped like an acquirer key, wherever it appears in text (a URL, an error message, a
 * stack): the prefix in any case (its body is the secret, whatever the prefix's case), the body's
 * characters plain or percent-encoded (`acquirer_key_abc%2Dsecret` is one key to whoever decodes it).
 */
const KEY_LIKE = /acquirer_(?:api_)?key_(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2})+/gi;
const HAS_KEY = /acquirer_(?:api_)?key_[A-Za-z0-9_-]/i;

/**
 * Whether a text could need redacting: `acquirer_` in any case, a percent sign that could encode any
 * of it, or an `@` (a URL's password comes before one). Asked of every string of every log line and
 * every forwarded header, so one regular expression of literals: linear in a text a client writes
 * (headers of up to 16 KiB).
 */
const MAY_NEED_REDACTING = /acquirer_|%|@/i;

/**
 * The password of a URL with credentials, up to the last `@` of the authority as URL parsers read it
 * (`u:p@ss@h` loses `p@ss` whole). No scheme in the pattern: tried at every word boundary, one was
 * quadratic in a 16 KiB header; each part stops at a character of `://`, so no text is scanned twice.
 */
const URL_PASSWORD = /(:\/\/[^\s:/@]*:)[^\s/]+@/g;

/** Replaces a whole text whose key is percent-encoded in its prefix, where no pattern can cut it out alone. */
export const ENCODED_KEY_REDACTED = '[redacted: holds a percent-encoded key]';
/** Replaces a whole text holding a percent-encoded URL with a password (`redis%3A%2F%2Fu%3Apw%40h`, a query's value). */
export const ENCODED_URL_PASSWORD_REDACTED = '[redacted: holds a percent-encoded URL with a password]';

export function redactSecrets(text: string): string {
  // Every log line passes through here: a string neither pattern can match is returned as it is,
  // without a scan by each regex and a copy.
  if (!MAY_NEED_REDACTING.test(text)) return text;
  const redacted = text.replace(KEY_LIKE, 'acquirer_key_[redacted]').replace(URL_PASSWORD, '$1[redacted]@');
  // A prefix spelled with percent-encoded characters (`acquirer%5Fkey_…`), once or more; or a text
  // encoded so often that what it hides was not reached (no log reader needs one).
  if (redacted.includes('%')) {
    const { text: decoded, complete } = percentDecode(redacted);
    if (!complete || HAS_KEY.test(decoded)) return ENCODED_KEY_REDACTED;
    // A password cut out before decoding reads `[redacted]` here, and is left as it is by this replace.
    if (decoded.replace(URL_PASSWORD, '$1[redacted]@') !== decoded) return ENCODED_URL_PASSWORD_REDACTED;
  }
  return redacted;
}

/**
 * A key's random part on its own, without its prefix: 43 or more base64url characters in a row,
 * upper and lower case among them (a random one lacks either with odds of about 1 in 10^10, while a
 * long name of a file, route or permission is rarely in mixed case without a separator).
 */
const KEY_BODY_LIKE = /[A-Za-z0-9_-]{43,}/g;
const isKeyBodyLike = (run: string) => /[A-Z]/.test(run) && /[a-z]/.test(run);

/** Where an operator may have pasted a key's random part alone (the CLI's messages): it is cut out too. */
export function redactKeysAndBodies(text: string): string {
  return redactSecrets(text).replace(KEY_BODY_LIKE, (run) => (isKeyBodyLike(run) ? '[redacted]' : run));
}

/**
 * Whether a text holds a key with its prefix (in any case, however percent-encoded) or a URL's
 * password: what `redactSecrets` would cut out. Unlike `holdsKey`, a long mixed-case run alone is not
 * taken for a key's random part: a base64url SHA-256 (an ETag) is the same 43 characters.
 */
export function holdsSecret(text: string): boolean {
  return redactSecrets(text) !== text;
}

/**
 * Whether a text holds a key, or what looks like a key's random part alone. Asked on the request
 * path (every forwarded header both ways): a text that holds nothing is returned by both patterns
 * unchanged, without a copy, and one too short for a random part skips the second.
 */
export function holdsKey(text: string): boolean {
  if (holdsSecret(text)) return true;
  return text.length >= KEY_BODY_MIN && text.replace(KEY_BODY_LIKE, (run) => (isKeyBodyLike(run) ? '[redacted]' : run)) !== text;
}
const KEY_BODY_MIN = 43;
