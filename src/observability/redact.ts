/** Anything shaped like an acquirer key, wherever it appears in text (a URL, an error message, a stack). */
const KEY_LIKE = /acquirer_(?:api_)?key_[A-Za-z0-9_-]+/g;

/** The password of a URL with credentials (redis://user:password@host). */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi;

export function redactSecrets(text: string): string {
  // Every log line passes through here: a string neither pattern can match is returned as it is,
  // without a scan by each regex and a copy.
  const keyLike = text.includes('acquirer_');
  const withPassword = text.includes('://') && text.includes('@');
  if (!keyLike && !withPassword) return text;
  return text.replace(KEY_LIKE, 'acquirer_key_[redacted]').replace(URL_PASSWORD, '$1[redacted]@');
}
