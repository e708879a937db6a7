import type { RequestHandler } from 'express';
import { DEFAULT_UPSTREAM_MAX_SOCKETS, halfOfPool } from '../../config/defaults.js';
import { GatewayError } from '../../errors/gateway-error.js';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export interface DispatchDeps {
  /** Forwards an allowed request upstream. */
  readonly proxy: RequestHandler;
  /** Requests of one acquirer being proxied at once, at most; one more is answered 429. Absent (apps built without a config): the configuration's default. */
  readonly acquirerMaxInFlight?: number | undefined;
}

/**
 * Requests of each acquirer being proxied now. A download its client reads slowly, or not at all,
 * holds a pooled upstream connection until the stall watch cuts it: without a bound per acquirer,
 * one acquirer's clients could hold every connection in the pool, and every other acquirer's
 * requests would wait for one and time out.
 */
class InFlightByAcquirer {
  readonly #counts = new Map<string, number>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  enter(acquirerId: string): boolean {
    const count = this.#counts.get(acquirerId) ?? 0;
    if (count >= this.#limit) return false;
    this.#counts.set(acquirerId, count + 1);
    return true;
  }

  leave(acquirerId: string): void {
    const count = this.#counts.get(acquirerId)! - 1;
    if (count === 0) this.#counts.delete(acquirerId);
    else this.#counts.set(acquirerId, count);
  }
}

/** Step 6: answer from the policy when the route says so, otherwise proxy, within the acquirer's share. */
export function createDispatch({ proxy, acquirerMaxInFlight = halfOfPool(DEFAULT_UPSTREAM_MAX_SOCKETS) }: DispatchDeps): RequestHandler {
  const inFlight = new InFlightByAcquirer(acquirerMaxInFlight);
  return function dispatch(req, res, next) {
    if (res.locals.route!.serve === 'permission_catalogue') {
      const body = res.locals.policy.catalogueBody;
      res.writeHead(200, { 'content-type': JSON_CONTENT_TYPE, 'content-length': String(body.length), 'x-request-id': res.locals.requestId });
      res.end(body);
      return;
    }
    // The client left while its key was looked up: its response has closed already, and a share
    // taken now would never be given back. Nothing is forwarded for it (the proxy says the same).
    if (req.socket.destroyed) return;
    const acquirerId = res.locals.key!.acquirerId;
    if (!inFlight.enter(acquirerId)) throw new GatewayError('ACQUIRER_BUSY');
    // A response closes once, however it ends (answered, failed, cut, the client gone).
    res.on('close', () => inFlight.leave(acquirerId));
    return proxy(req, res, next);
  };
}
