/**
 * @module
 * The sample upstream's check of the gateway's signature (ACQUIRER_SIGNING_SECRET), made as a backend
 * would make it, apart from the gateway's signer: docs/security.md, "Verifying the acquirer header".
 */
import { createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { ACQUIRER_KEY_ID_HEADER, ACQUIRER_SIGNATURE_HEADER } from '../net/header-names.js';

/** How far `t` may be from the sample's clock, either way: a request signed longer ago is a replay. */
export const SAMPLE_SIGNATURE_WINDOW_SECONDS = 300;

const SIGNATURE = /^t=(\d{1,12})((?:,v1=[0-9a-f]{64}){1,2})$/;

/**
 * Whether a request was signed by a gateway holding one of `signingSecret`'s secrets (comma-separated,
 * as the setting), within the window, with the key id and `acquirerHeader` present.
 */
export function createSignatureCheck(signingSecret: string, acquirerHeader: string): (req: http.IncomingMessage) => boolean {
  const keys = signingSecret.split(',').filter((s) => s !== '').map((s) => createSecretKey(Buffer.from(s, 'utf8')));
  return function signedByGateway(req) {
    const signature = req.headers[ACQUIRER_SIGNATURE_HEADER];
    const keyId = req.headers[ACQUIRER_KEY_ID_HEADER];
    const acquirerId = req.headers[acquirerHeader];
    const match = typeof signature === 'string' ? SIGNATURE.exec(signature) : null;
    if (match === null || typeof keyId !== 'string' || typeof acquirerId !== 'string') return false;
    if (Math.abs(Math.floor(Date.now() / 1000) - Number(match[1])) > SAMPLE_SIGNATURE_WINDOW_SECONDS) return false;
    const text = `${match[1]}\n${req.method}\n${req.url}\n${acquirerId}\n${keyId}`;
    const given = match[2]!.slice(',v1='.length).split(',v1=').map((hex) => Buffer.from(hex, 'hex'));
    return keys.some((key) => {
      const expected = createHmac('sha256', key).update(text).digest();
      return given.some((v1) => timingSafeEqual(v1, expected));
    });
  };
}
