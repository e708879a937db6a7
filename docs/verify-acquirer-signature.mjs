import { createHmac, timingSafeEqual } from 'node:crypto';

// req: a node:http request as the backend received it; secrets: ACQUIRER_SIGNING_SECRET's (both while rotating).
export function verifyAcquirerSignature(req, secrets, nowSeconds = Math.floor(Date.now() / 1000)) {
  const match = /^t=(\d{1,12})((?:,v1=[0-9a-f]{64}){1,2})$/.exec(req.headers['x-acquirer-signature'] ?? '');
  const keyId = req.headers['x-acquirer-key-id'];
  const acquirerId = req.headers['x-acquirer-id']; // the policy's acquirer_header
  if (!match || typeof keyId !== 'string' || typeof acquirerId !== 'string') return false;
  if (Math.abs(nowSeconds - Number(match[1])) > 300) return false; // the replay window
  const signed = `${match[1]}\n${req.method}\n${req.url}\n${acquirerId}\n${keyId}`;
  const given = match[2].slice(4).split(',v1=').map((hex) => Buffer.from(hex, 'hex'));
  return secrets.some((secret) => {
    const expected = createHmac('sha256', secret).update(signed).digest();
    return given.some((v1) => timingSafeEqual(v1, expected));
  });
}
