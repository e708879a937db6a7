import type { Cluster, Redis } from 'ioredis';
import type { RateLimit } from '../policy/rate-limit.js';
import { allowedAt, GCRA_EPSILON_MS, type Taken } from './gcra.js';
import type { RateLimiter } from './rate-limiter.js';

/**
 * gcra.ts's arithmetic in one script, on Redis's clock (TIME before a write: Redis 5 or later), so
 * that every gateway of a fleet takes from one budget in one round trip. KEYS[1]: the budget's TAT
 * (ms); ARGV: the interval and the tolerance (ms). Returns allowed (1 or 0), the milliseconds until
 * the budget is whole, and a refusal's wait; as strings, since Redis would cut a Lua number to an
 * integer.
 */
export const TAKE_SCRIPT = `local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local stored = tonumber(redis.call('GET', KEYS[1])) or 0
local from = math.min(math.max(stored, now), now + tolerance)
local nxt = from + interval
local wait = nxt - now - tolerance
if wait > ${GCRA_EPSILON_MS} then
  if from < stored then redis.call('SET', KEYS[1], string.format('%.6f', from), 'PX', math.ceil(from - now)) end
  return {0, tostring(from - now), tostring(wait)}
end
redis.call('SET', KEYS[1], string.format('%.6f', nxt), 'PX', math.ceil(nxt - now))
return {1, tostring(nxt - now), '0'}`;

type TakeCommand = (key: string, intervalMs: string, toleranceMs: string) => Promise<[number, string, string]>;

export interface RedisRateLimiterOptions {
  /** A gateway's command connection (it fails fast: no offline queue, a command timeout). */
  readonly client: Redis | Cluster;
  /** Where each budget is kept (RedisLayout.rateBudget). */
  readonly budgetKey: (keyId: string, budget: string) => string;
  /** A take Redis did not answer; the request is then judged by RATE_LIMIT_FAIL. */
  readonly onError: (err: unknown) => void;
}

/** Exact budgets for the whole fleet, at one Redis round trip per limited request (RATE_LIMIT_STORE=redis). */
export class RedisRateLimiter implements RateLimiter {
  readonly #take: TakeCommand;
  readonly #budgetKey: RedisRateLimiterOptions['budgetKey'];
  readonly #onError: (err: unknown) => void;

  constructor({ client, budgetKey, onError }: RedisRateLimiterOptions) {
    // defineCommand sends EVALSHA, and the script itself once when Redis does not have it (NOSCRIPT).
    client.defineCommand('acquirerGatewayTake', { numberOfKeys: 1, lua: TAKE_SCRIPT });
    const command = (client as unknown as { acquirerGatewayTake: TakeCommand }).acquirerGatewayTake;
    this.#take = command.bind(client);
    this.#budgetKey = budgetKey;
    this.#onError = onError;
  }

  async take(keyId: string, limit: RateLimit): Promise<Taken | 'unavailable'> {
    const toleranceMs = limit.burst * limit.intervalMs;
    let reply: [number, string, string];
    try {
      reply = await this.#take(this.#budgetKey(keyId, limit.budget), String(limit.intervalMs), String(toleranceMs));
    } catch (err) {
      this.#onError(err);
      return 'unavailable';
    }
    const resetMs = Number(reply[1]);
    if (reply[0] === 1) return allowedAt(resetMs, limit.intervalMs, toleranceMs);
    return { allowed: false, remaining: 0, resetMs, retryAfterMs: Number(reply[2]) };
  }

  async close(): Promise<void> {}
}
