/**
 * @module
 * The acquirer header the backend can verify: with ACQUIRER_SIGNING_SECRET, each request
 * forwarded upstream carries `X-Acquirer-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`, one `v1`
 * per secret in the order given, and `X-Acquirer-Key-Id`, so that the verifier has every input.
 * The format and a verifier: docs/security.md, "Verifying the acquirer header".
 */
import { createHmac, createSecretKey } from 'node:crypto';
import type { OutgoingHttpHeaders } from 'node:http';
import { ACQUIRER_KEY_ID_HEADER, ACQUIRER_SIGNATURE_HEADER } from '../net/header-names.js';

/** What of the key is signed: its acquirer id (sent in the acquirer header) and its public id. */
export interface SigningKey {
  readonly id: string;
  readonly acquirerId: string;
}

/** Adds the signature and the key id to a forwarded request's headers. */
export type AcquirerSigner = (headers: OutgoingHttpHeaders, method: string, target: string, key: SigningKey) => void;

/** The text each `v1` is the HMAC-SHA256 of (UTF-8): the second, method, request-target, acquirer id and key id. */
function signedText(t: number, method: string, target: string, acquirerId: string, keyId: string): string {
  return `${t}\n${method}\n${target}\n${acquirerId}\n${keyId}`;
}

/**
 * The signer for ACQUIRER_SIGNING_SECRET's secrets (already checked: config/setting-types.ts), or
 * `undefined` for none, so that an unsigned gateway does no work per request at all. The secrets
 * become key objects once, here. `now` is the wall clock (ms): the verifier compares `t` with its own.
 *
 * @example
 * const sign = createAcquirerSigner(['<new secret>', '<old secret>']);
 * sign?.(headers, 'GET', '/v1/acquirer/eod_statements?page=2', { id: 'key_…', acquirerId: 'acq_1' });
 * // headers['x-acquirer-signature'] === 't=1767225600,v1=<new>,v1=<old>'
 */
export function createAcquirerSigner(secrets: readonly string[], now: () => number = Date.now): AcquirerSigner | undefined {
  if (secrets.length === 0) return undefined;
  const keys = secrets.map((secret) => createSecretKey(Buffer.from(secret, 'utf8')));
  return function signForUpstream(headers, method, target, key) {
    const t = Math.floor(now() / 1000);
    const text = signedText(t, method, target, key.acquirerId, key.id);
    let value = `t=${t}`;
    for (const secret of keys) value += `,v1=${createHmac('sha256', secret).update(text).digest('hex')}`;
    headers[ACQUIRER_SIGNATURE_HEADER] = value;
    headers[ACQUIRER_KEY_ID_HEADER] = key.id;
  };
}
