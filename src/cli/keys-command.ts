import type { ParseArgsOptionsConfig } from 'node:util';
import { CONFIG_FIELDS, ConfigError, readSetting } from '../config/env.js';
import { loadPolicy, formatPolicyError } from '../policy/load.js';
import {
  generateKey,
  generateKeyId,
  hashKey,
  isValidAcquirerId,
  toPublicRecord,
  type ApiKeyRecord,
} from '../keys/api-key.js';
import { CorruptKeyRecordError, KeyCommandError, KeyNotFoundError, type KeyStore } from '../keys/key-store.js';
import { RedisKeyStore } from '../keys/redis-key-store.js';
import { familyCoveredWhole, parseCidr } from '../net/ip-allowlist.js';
import { holdsKey, redactSecrets } from '../secrets/redact.js';
import { CommandError, parseCommandLine, UsageError, wantsHelp } from './usage-error.js';

export const KEYS_USAGE = `usage:
  acquirer-gateway keys create --acquirer ID --permissions p1,p2 [--allow-ip CIDR,CIDR] [--description TEXT]
  acquirer-gateway keys update ID [--permissions p1,p2] [--allow-ip CIDR,CIDR | --allow-any-ip]
  acquirer-gateway keys disable ID
  acquirer-gateway keys show ID
  acquirer-gateway keys list [--acquirer ID]
environment: REDIS_URL, REDIS_KEY_PREFIX, POLICY_FILE (permission names are checked against its catalogue)`;

export interface KeysContext {
  readonly env: NodeJS.ProcessEnv;
  readonly out: (line: string) => void;
  /** For tests; otherwise a Redis store from REDIS_URL. */
  readonly store?: KeyStore;
  readonly now?: () => Date;
}

function list(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

async function permissionCatalogue(env: NodeJS.ProcessEnv): Promise<ReadonlySet<string>> {
  let file: string;
  try {
    file = readSetting(env, CONFIG_FIELDS.policyFile);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
  const loaded = await loadPolicy(file);
  if (!loaded.ok) throw new CommandError(`cannot check permissions against the policy's catalogue:\n${loaded.errors.map(formatPolicyError).join('\n')}`);
  return loaded.policy.permissionNames;
}

async function validPermissions(text: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const names = [...new Set(list(text))];
  if (names.length === 0) throw new UsageError('--permissions: give at least one permission');
  const catalogue = await permissionCatalogue(env);
  const unknown = names.filter((n) => !catalogue.has(n));
  if (unknown.length > 0) throw new UsageError(`--permissions: unknown permission ${unknown.map((n) => `"${n}"`).join(', ')} (not in the policy's catalogue)`);
  return names;
}

/**
 * An empty list (say, from an unset shell variable) would silently mean "any address", so it is
 * refused: leaving the whitelist out, or `--allow-any-ip` on update, says so explicitly.
 */
function validAllowedIps(text: string): string[] {
  if (list(text).length === 0) {
    throw new UsageError('--allow-ip: no address given; leave --allow-ip out (create) or use --allow-any-ip (update) to allow every address');
  }
  const cidrs: string[] = [];
  for (const entry of list(text)) {
    const parsed = parseCidr(entry);
    if (!parsed.ok) throw new UsageError(`--allow-ip: "${entry}": ${parsed.reason}${parsed.everyAddress ? '; leave --allow-ip out to allow every address' : ''}`);
    if (!cidrs.includes(parsed.cidr)) cidrs.push(parsed.cidr);
  }
  const whole = familyCoveredWhole(cidrs);
  if (whole !== null) {
    throw new UsageError(`--allow-ip: together these allow every ${whole} address, as a /0 would; list the networks the key is used from`);
  }
  return cidrs;
}

function parse(args: string[], options: ParseArgsOptionsConfig, positionals: number) {
  let parsed;
  try {
    parsed = parseCommandLine(args, options, true);
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${KEYS_USAGE}`);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(`${positionals === 0 ? 'no arguments expected' : 'expected a key id'}\n${KEYS_USAGE}`);
  }
  return { values: parsed.values as Record<string, string | undefined>, positionals: parsed.positionals };
}

/**
 * The key id a command names. An operator who pastes the API key itself instead gets a usage error
 * that does not repeat it, before it is looked up: as a lookup it would have gone to Redis as part of
 * a key name, and come back in "no key with id …".
 */
function keyIdArgument(text: string): string {
  if (/acquirer_/i.test(text) || redactSecrets(text) !== text) {
    throw new UsageError('expected a key id (key_…), and this argument is shaped like an API key: it was not looked up or printed. `keys list --acquirer <id>` shows the ids');
  }
  // Anything else that is no id (the key's random part pasted alone, say) is not repeated either.
  if (!KEY_ID_ARGUMENT.test(text)) {
    throw new UsageError('expected a key id (key_ and letters, digits, _ or -, as create and list print it); this argument is not one: it was not looked up or printed. `keys list --acquirer <id>` shows the ids');
  }
  return text;
}

/**
 * What a key id can be: `key_` and 20 hex digits as created, with room for ids written by hand, but
 * never as long as a key's random part (43 characters or more), `key_` before it or not.
 */
const KEY_ID_ARGUMENT = /^key_[A-Za-z0-9_-]{1,32}$/;

function redisTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`; // never echo a password
  } catch {
    return 'REDIS_URL';
  }
}

/** `acquirer-gateway keys …`. Input is validated completely before anything is written. */
export async function keysCommand(args: string[], ctx: KeysContext): Promise<void> {
  if (wantsHelp(args)) return ctx.out(KEYS_USAGE);
  const [sub, ...rest] = args;
  const now = ctx.now ?? (() => new Date());
  const print = (record: ApiKeyRecord) => ctx.out(JSON.stringify(toPublicRecord(record)));

  let run: (store: KeyStore) => Promise<void>;
  switch (sub) {
    case 'create': {
      const { values } = parse(rest, { acquirer: { type: 'string' }, permissions: { type: 'string' }, 'allow-ip': { type: 'string' }, description: { type: 'string' } }, 0);
      const acquirer = (values.acquirer ?? '').trim();
      if (acquirer === '') throw new UsageError('--acquirer: required and must not be empty');
      if (!isValidAcquirerId(acquirer)) throw new UsageError('--acquirer: use 1 to 128 of A-Z a-z 0-9 . _ : - (starting with a letter or digit)');
      // Both are stored and printed by show and list (the acquirer id also travels upstream): never a key.
      if (holdsKey(acquirer)) throw new UsageError('--acquirer: this is shaped like an API key; it was not stored or printed');
      if (values.description !== undefined && holdsKey(values.description)) {
        throw new UsageError('--description: holds something shaped like an API key; it was not stored or printed');
      }
      if (values.permissions === undefined) throw new UsageError('--permissions: required');
      const permissions = await validPermissions(values.permissions, ctx.env);
      const allowedIps = values['allow-ip'] === undefined ? [] : validAllowedIps(values['allow-ip']);
      const key = generateKey();
      const record: ApiKeyRecord = {
        id: generateKeyId(),
        key_hash: hashKey(key),
        acquirer_id: acquirer,
        permissions,
        allowed_ips: allowedIps,
        description: values.description ?? '',
        created_at: now().toISOString(),
        disabled_at: null,
      };
      run = async (store) => {
        await store.create(record);
        // The only time the secret is shown; the store keeps its hash.
        const { id, ...rest } = toPublicRecord(record);
        ctx.out(JSON.stringify({ id, key, ...rest }));
      };
      break;
    }
    case 'update': {
      const { values, positionals } = parse(rest, { permissions: { type: 'string' }, 'allow-ip': { type: 'string' }, 'allow-any-ip': { type: 'boolean' } }, 1);
      const id = keyIdArgument(positionals[0]!);
      const anyIp = (values['allow-any-ip'] as unknown as boolean | undefined) === true;
      if (anyIp && values['allow-ip'] !== undefined) throw new UsageError('update: --allow-ip and --allow-any-ip contradict each other');
      if (values.permissions === undefined && values['allow-ip'] === undefined && !anyIp) {
        throw new UsageError('update: give --permissions, --allow-ip or --allow-any-ip');
      }
      const changes = {
        ...(values.permissions !== undefined ? { permissions: await validPermissions(values.permissions, ctx.env) } : {}),
        ...(values['allow-ip'] !== undefined ? { allowed_ips: validAllowedIps(values['allow-ip']) } : {}),
        ...(anyIp ? { allowed_ips: [] } : {}),
      };
      run = async (store) => print(await store.update(id, changes));
      break;
    }
    case 'disable': {
      const { positionals } = parse(rest, {}, 1);
      const id = keyIdArgument(positionals[0]!);
      run = async (store) => print(await store.disable(id, now()));
      break;
    }
    case 'show': {
      const { positionals } = parse(rest, {}, 1);
      const id = keyIdArgument(positionals[0]!);
      run = async (store) => {
        const record = await store.findById(id);
        if (record === null) throw new KeyNotFoundError(id);
        print(record);
      };
      break;
    }
    case 'list': {
      const { values } = parse(rest, { acquirer: { type: 'string' } }, 0);
      run = async (store) => {
        const corrupt: string[] = [];
        for (const record of await store.list(values.acquirer, (what) => corrupt.push(what))) print(record);
        if (corrupt.length > 0) {
          throw new CommandError(`${corrupt.length} key record(s) in Redis could not be read (${corrupt.join(', ')}); the gateway refuses a key whose record it cannot read (503)`);
        }
      };
      break;
    }
    default:
      throw new UsageError(sub === undefined ? KEYS_USAGE : `unknown keys command "${sub}"\n${KEYS_USAGE}`);
  }

  // Checked as serve checks them: an empty prefix would write keys no gateway reads, and a URL that
  // is not one would fail later, with a stack.
  let redisUrl: string;
  let prefix: string;
  try {
    redisUrl = readSetting(ctx.env, CONFIG_FIELDS.redisUrl);
    prefix = readSetting(ctx.env, CONFIG_FIELDS.redisKeyPrefix);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
  const store =
    ctx.store ??
    new RedisKeyStore({ url: redisUrl, prefix, waitForConnection: true, commandTimeoutMs: 5000 });
  try {
    if (store instanceof RedisKeyStore) await store.connect();
    await run(store);
  } catch (err) {
    if (err instanceof KeyCommandError) throw new CommandError(err.message);
    if (err instanceof CorruptKeyRecordError) throw new CommandError(`cannot read the key in Redis: ${err.message}; repair or delete that value`);
    if (err instanceof UsageError || err instanceof CommandError) throw err;
    if (ctx.store === undefined) throw new CommandError(`cannot use Redis at ${redisTarget(redisUrl)}: ${(err as Error).message}`);
    throw err;
  } finally {
    if (ctx.store === undefined) await store.close();
  }
}
