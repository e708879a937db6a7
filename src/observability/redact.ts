/** Anything shaped like an acquirer key, wherever it appears in text (a URL, an error message, a stack). */
const KEY_LIKE = /acquirer_(?:api_)?key_[A-Za-z0-9_-]+/g;

export function redactSecrets(text: string): string {
  return text.replace(KEY_LIKE, 'acquirer_key_[redacted]');
}
