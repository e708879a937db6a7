import type { RateLimit } from '../policy/rate-limit.js';
import type { Taken } from './gcra.js';

/** Where budgets are kept: in this process (LocalRateLimiter) or in Redis for the fleet (RedisRateLimiter). */
export interface RateLimiter {
  /**
   * One request of key `keyId` taken from its budget `limit.budget`. A store that could not be asked
   * answers `unavailable` (RATE_LIMIT_FAIL says what that means).
   */
  take(keyId: string, limit: RateLimit): Taken | Promise<Taken | 'unavailable'>;
  close(): Promise<void>;
}
