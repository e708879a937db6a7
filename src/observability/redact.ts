/** Anything shaped like an acquirer key, wherever it appears in text (a URL, an error message, a stack). */
const KEY_LIKE = /acquirer_(?:api_)?key_[A-Za-z0-9_-]+/g;

/** The password of a URL with credentials (redis://user:password@host). */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi;

export function redactSecrets(text: string): string {
  return text.replace(KEY_LIKE, 'acquirer_key_[redacted]').replace(URL_PASSWORD, '$1[redacted]@');
}
