/**
 * Anything shaped like an acquirer key, wherever it appears in text (a URL, an error message, a
 * stack): the prefix in any case (its body is the secret, whatever the prefix's case), the body's
 * characters plain or percent-encoded (`acquirer_key_abc%2Dsecret` is one key to whoever decodes it).
 */
const KEY_LIKE = /acquirer_(?:api_)?key_(?:[A-Za-z0-9_-]|%[0-9A-Fa-f]{2})+/gi;
const HAS_KEY = /acquirer_(?:api_)?key_[A-Za-z0-9_-]/i;
/** What every text that could hold a key contains: the prefix, or a percent sign that could encode it. */
const MAYBE_KEY = /acquirer_|%/i;

/** The password of a URL with credentials (redis://user:password@host). */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi;

/** Replaces a whole text whose key is percent-encoded in its prefix, where no pattern can cut it out alone. */
export const ENCODED_KEY_REDACTED = '[redacted: holds a percent-encoded key]';

/** Every `%XX` decoded, as often as a text was encoded (`%255F` is `%5F` is `_`); other bytes kept. */
function percentDecoded(text: string): string {
  let current = text;
  for (let round = 0; round < 4 && current.includes('%'); round++) {
    const next = current.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === current) break;
    current = next;
  }
  return current;
}

export function redactSecrets(text: string): string {
  // Every log line passes through here: a string neither pattern can match is returned as it is,
  // without a scan by each regex and a copy.
  const maybeKey = MAYBE_KEY.test(text);
  const withPassword = text.includes('://') && text.includes('@');
  if (!maybeKey && !withPassword) return text;
  const redacted = text.replace(KEY_LIKE, 'acquirer_key_[redacted]').replace(URL_PASSWORD, '$1[redacted]@');
  // A prefix spelled with percent-encoded characters (`acquirer%5Fkey_…`), once or more.
  if (redacted.includes('%') && HAS_KEY.test(percentDecoded(redacted))) return ENCODED_KEY_REDACTED;
  return redacted;
}
