import type { NextFunction, RequestHandler, Response } from 'express';
import { parseBearer } from './parse-bearer.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { hashKey } from '../../keys/api-key.js';
import { KeyStoreUnavailableError, type KeyResolver, type KeyVerdict } from '../../keys/key-resolver.js';

export interface ApiKeyAuthDeps {
  readonly resolver: KeyResolver;
}

/** Step 1: the bearer key must exist and not be disabled. Sets `res.locals.key`. */
export function createApiKeyAuth({ resolver }: ApiKeyAuthDeps): RequestHandler {
  return function apiKeyAuth(req, res, next) {
    const bearer = parseBearer(req.rawHeaders);
    if (!bearer.ok) throw new GatewayError(bearer.code);
    const keyHash = hashKey(bearer.token);
    // A key judged from memory is admitted at once; only a store lookup makes the request wait.
    const remembered = resolver.fromMemory(keyHash);
    if (remembered !== undefined) return admit(remembered, res, next);
    return resolver.resolve(keyHash).then(
      (verdict) => admit(verdict, res, next),
      (err: unknown) => {
        if (err instanceof KeyStoreUnavailableError) throw new GatewayError('KEY_STORE_UNAVAILABLE', { cause: err.cause });
        throw err;
      },
    );
  };
}

function admit(verdict: KeyVerdict, res: Response, next: NextFunction): void {
  if (verdict.kind === 'unknown') throw new GatewayError('API_KEY_UNKNOWN');
  if (verdict.kind === 'disabled') throw new GatewayError('API_KEY_DISABLED');
  res.locals.key = verdict.key;
  next();
}
