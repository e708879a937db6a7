/**
 * @module
 * The key store as every command reaches it: Redis from the settings `serve` reads (REDIS_URL, or
 * Sentinels, or a Cluster, and REDIS_KEY_PREFIX), checked as serve checks them, connected once, and
 * its failures turned into the command's exit codes.
 */
import { CorruptKeyRecordError, KeyCommandError, type KeyStore } from '../keys/key-store.js';
import { RedisKeyStore, type RedisKeyStoreOptions } from '../keys/redis-key-store.js';
import { redisTarget, type RedisTarget } from '../keys/redis-target.js';
import { REDIS_CONNECTION_FIELDS } from '../config/redis-fields.js';
import { CommandError, UsageError } from './command-line.js';
import { redisSettings, setting } from './settings.js';

/** How long a command waits for one Redis command before it says Redis cannot be used. */
const COMMAND_TIMEOUT_MS = 5000;

export interface KeyStoreAccess {
  /** For tests; otherwise a Redis store from the environment. */
  readonly store?: KeyStore | undefined;
  /** What a command that writes wants told (announcements, replication), given where Redis is. */
  readonly hooks?: (target: RedisTarget) => Pick<RedisKeyStoreOptions, 'onAnnounced' | 'onReplicated'>;
}

/**
 * Runs `run` against the key store and closes it. A bad setting is a UsageError (exit 2); Redis that
 * cannot be used, a missing key or an unreadable record a CommandError (exit 1), never a stack.
 * @example await withKeyStore(process.env, (store) => store.findById('key_0a1b…'))
 */
export async function withKeyStore<T>(env: NodeJS.ProcessEnv, run: (store: KeyStore) => Promise<T>, access: KeyStoreAccess = {}): Promise<T> {
  // An empty prefix would name keys no gateway reads, and a URL that is not one would fail later, with a stack.
  const settings = redisSettings(env);
  const pepper = setting(env, REDIS_CONNECTION_FIELDS.keyHashPepper);
  let target: RedisTarget;
  try {
    target = redisTarget(settings);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new CommandError((err as Error).message); // the CA file
  }
  const store = access.store ?? new RedisKeyStore({ target, prefix: settings.redisKeyPrefix, pepper, waitForConnection: true, commandTimeoutMs: COMMAND_TIMEOUT_MS, ...access.hooks?.(target) });
  try {
    if (store instanceof RedisKeyStore) await store.connect();
    return await run(store);
  } catch (err) {
    if (err instanceof KeyCommandError) throw new CommandError(err.message);
    if (err instanceof CorruptKeyRecordError) throw new CommandError(`cannot read the key in Redis: ${err.message}; repair or delete that value`);
    if (err instanceof UsageError || err instanceof CommandError) throw err;
    if (access.store === undefined) throw new CommandError(`cannot use Redis at ${target.description}: ${(err as Error).message}`);
    throw err;
  } finally {
    if (access.store === undefined) await store.close();
  }
}
