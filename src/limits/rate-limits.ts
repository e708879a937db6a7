/**
 * @module
 * The gateway's rate limits (RATE_LIMIT_STORE), opened only once a policy declares a rate: a
 * gateway whose policy declares none makes no Redis connection and no call for them.
 */
import { randomUUID } from 'node:crypto';
import { RedisConnections } from '../keys/redis-connections.js';
import { RedisLayout } from '../keys/redis-layout.js';
import type { RedisTarget } from '../keys/redis-target.js';
import type { CompiledPolicy } from '../policy/compile.js';
import type { RateLimit } from '../policy/rate-limit.js';
import type { Taken } from './gcra.js';
import { InstanceCount } from './instance-count.js';
import { LocalRateLimiter } from './local-rate-limiter.js';
import type { RateLimiter } from './rate-limiter.js';
import { RedisRateLimiter } from './redis-rate-limiter.js';

export type RateLimitStore = 'local' | 'redis';

/** What failed: a request's take (judged by RATE_LIMIT_FAIL), an announcement, or the connection itself. */
export type RateStoreContext = 'rate limit' | 'instance count' | 'connection';

export interface RateLimitsOptions {
  readonly store: RateLimitStore;
  /** The gateway's Redis; absent with the embedded key store, where an instance counts itself alone. */
  readonly redis?: { readonly target: RedisTarget; readonly prefix: string; readonly commandTimeoutMs: number } | undefined;
  /** Redis did not answer a take or an announcement, or the connection for them failed. */
  readonly onStoreError: (err: unknown, context: RateStoreContext) => void;
  /** Each count of the live instances read (local store with Redis). */
  readonly onInstances?: (count: number) => void;
  /** Milliseconds on a monotonic clock (the local store). */
  readonly now?: () => number;
}

export class RateLimits implements RateLimiter {
  readonly #options: RateLimitsOptions;
  #limiter: RateLimiter | undefined;
  #connections: RedisConnections | undefined;
  #instances: InstanceCount | undefined;

  constructor(options: RateLimitsOptions) {
    if (options.store === 'redis' && options.redis === undefined) throw new Error('RATE_LIMIT_STORE=redis counts rates in Redis, and this gateway has none (the embedded key store): use RATE_LIMIT_STORE=local');
    this.#options = options;
  }

  /** A policy now in use: one that declares a rate opens the store now, so that instances are counted before the first limited request. */
  use(policy: CompiledPolicy): void {
    if (policy.routes.some((route) => route.rateLimit !== undefined)) this.#open();
  }

  take(keyId: string, limit: RateLimit): Taken | Promise<Taken | 'unavailable'> {
    return this.#open().take(keyId, limit);
  }

  #open(): RateLimiter {
    if (this.#limiter !== undefined) return this.#limiter;
    const { store, redis, onStoreError, onInstances, now } = this.#options;
    if (redis === undefined) return (this.#limiter = new LocalRateLimiter({ instances: () => 1, now }));
    const connections = new RedisConnections({ target: redis.target, commandTimeoutMs: redis.commandTimeoutMs, onEvent: () => {}, onError: (err) => onStoreError(err, 'connection') });
    this.#connections = connections;
    const layout = new RedisLayout(redis.prefix, connections.db);
    if (store === 'redis') {
      return (this.#limiter = new RedisRateLimiter({ client: connections.client, budgetKey: (keyId, budget) => layout.rateBudget(keyId, budget), onError: (err) => onStoreError(err, 'rate limit') }));
    }
    const instances = new InstanceCount({
      client: connections.client,
      key: layout.instances,
      id: randomUUID(),
      onCount: (count) => onInstances?.(count),
      onError: (err) => onStoreError(err, 'instance count'),
    });
    this.#instances = instances;
    return (this.#limiter = new LocalRateLimiter({ instances: instances.get, now }));
  }

  /** The gateway drains: it leaves the count of live instances, and goes on judging what it still serves. */
  async leave(): Promise<void> {
    await this.#instances?.leave();
  }

  async close(): Promise<void> {
    await this.leave();
    await this.#connections?.close();
  }
}
