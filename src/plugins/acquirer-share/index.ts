import type { RequestHandler } from 'express';
import { DEFAULT_UPSTREAM_MAX_SOCKETS, halfOfPool } from '../../config/defaults.js';
import { GatewayError } from '../../errors/gateway-error.js';

export interface AcquirerShareDeps {
  /** Requests of one acquirer under way at once, at most; one more is answered 429. Absent (apps built without a config): the configuration's default. */
  readonly acquirerMaxInFlight?: number | undefined;
}

/**
 * Requests of each acquirer under way now, from their body's reading to their answer's end. A
 * download its client reads slowly, or not at all, holds a pooled upstream connection until the
 * stall watch cuts it, and a body arriving slowly holds memory: without a bound per acquirer, one
 * acquirer's clients could hold every connection in the pool, or memory for every body at once.
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

/**
 * Step 6: the acquirer's share (ACQUIRER_MAX_IN_FLIGHT), taken once the request's head has been
 * judged and before its body is asked for, given back when the response closes. A route the gateway
 * answers itself takes none.
 */
export function createAcquirerShare({ acquirerMaxInFlight = halfOfPool(DEFAULT_UPSTREAM_MAX_SOCKETS) }: AcquirerShareDeps): RequestHandler {
  const inFlight = new InFlightByAcquirer(acquirerMaxInFlight);
  return function acquirerShare(req, res, next) {
    if (res.locals.route!.serve !== undefined) return next();
    // The client left while its key was looked up: its response has closed already, and a share
    // taken now would never be given back. Nothing is read or forwarded for it.
    if (req.socket.destroyed) return;
    const acquirerId = res.locals.key!.acquirerId;
    if (!inFlight.enter(acquirerId)) throw new GatewayError('ACQUIRER_BUSY');
    // A response closes once, however it ends (answered, failed, cut, the client gone).
    res.on('close', () => inFlight.leave(acquirerId));
    next();
  };
}
