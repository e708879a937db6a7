import type { RequestHandler } from 'express';
import { parseBearer } from '../auth/parse-bearer.js';
import { GatewayError } from '../errors/gateway-error.js';
import { hashKey } from '../keys/api-key.js';
import { KeyStoreUnavailableError, type KeyResolver } from '../keys/key-resolver.js';

export interface ApiKeyAuthDeps {
  readonly resolver: KeyResolver;
}

/** Step 1: the bearer key must exist and not be disabled. Sets `res.locals.key`. */
export function createApiKeyAuth({ resolver }: ApiKeyAuthDeps): RequestHandler {
  return async function apiKeyAuth(req, res, next) {
    const bearer = parseBearer(req.rawHeaders);
    if (!bearer.ok) throw new GatewayError(bearer.code);
    let verdict;
    try {
      verdict = await resolver.resolve(hashKey(bearer.token));
    } catch (err) {
      if (err instanceof KeyStoreUnavailableError) throw new GatewayError('KEY_STORE_UNAVAILABLE', { cause: err.cause });
      throw err;
    }
    if (verdict.kind === 'unknown') throw new GatewayError('API_KEY_UNKNOWN');
    if (verdict.kind === 'disabled') throw new GatewayError('API_KEY_DISABLED');
    res.locals.key = verdict.key;
    next();
  };
}
