/**
 * @module
 * A setting a command other than `serve` reads from the environment, checked as `serve` checks it.
 */
import type { FieldSpec } from '../config/env.js';
import { ConfigError, readSetting } from '../config/load-config.js';
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
