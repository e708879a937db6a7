import type { ErrorCode } from '../../errors/codes.js';
import { isWellFormedKey } from '../../keys/api-key.js';

export type BearerResult = { readonly ok: true; readonly token: string } | { readonly ok: false; readonly code: ErrorCode };

/** `Bearer` (any case, RFC 7235 §2.1), one or more spaces, the token, nothing else. */
const BEARER = /^bearer +(\S+)$/i;

/**
 * Extracts the API key from the raw headers. Raw, because Node keeps only the first of duplicate
 * Authorization headers: a second one would be judged by nobody, so it is refused outright.
 */
export function parseBearer(rawHeaders: readonly string[]): BearerResult {
  let value: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.length === 13 && rawHeaders[i]!.toLowerCase() === 'authorization') {
      if (value !== undefined) return { ok: false, code: 'BAD_REQUEST' };
      value = rawHeaders[i + 1]!;
    }
  }
  if (value === undefined) return { ok: false, code: 'API_KEY_MISSING' };
  const match = BEARER.exec(value);
  if (match === null) {
    return { ok: false, code: /^bearer(?: |$)/i.test(value) ? 'API_KEY_MALFORMED' : 'API_KEY_MISSING' };
  }
  const token = match[1]!;
  return isWellFormedKey(token) ? { ok: true, token } : { ok: false, code: 'API_KEY_MALFORMED' };
}
