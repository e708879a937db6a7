/**
 * @module
 * A setting a command other than `serve` reads from the environment, checked as `serve` checks it.
 */
import type { FieldSpec } from '../config/env.js';
import { REDIS_CONNECTION_FIELDS } from '../config/redis-fields.js';
import { ConfigError, readSetting, redisModeProblems } from '../config/load-config.js';
import type { RedisSettings } from '../keys/redis-target.js';
import { UsageError } from './command-line.js';

/** A bad value is a usage error naming the variable (exit 2). */
export function setting<T>(env: NodeJS.ProcessEnv, spec: FieldSpec<T>): T {
  try {
    return readSetting(env, spec);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
}

/** Where the key store's Redis is, as `serve` reads it: each setting checked, then how they combine. */
export function redisSettings(env: NodeJS.ProcessEnv): RedisSettings & { readonly redisKeyPrefix: string } {
  const values = Object.fromEntries(Object.entries(REDIS_CONNECTION_FIELDS).map(([name, spec]) => [name, setting(env, spec as FieldSpec<unknown>)]));
  const problems = redisModeProblems(values);
  if (problems.length > 0) throw new UsageError(`invalid configuration: ${problems.join('; ')}`);
  return values as unknown as RedisSettings & { readonly redisKeyPrefix: string };
}
