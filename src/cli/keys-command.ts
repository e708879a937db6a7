/**
 * @module
 * `acquirer-gateway keys …`: create, update, disable, show and list API keys in Redis. Input is
 * validated completely (key-arguments.ts) before anything is written.
 */
import type { ParseArgsOptionsConfig } from 'node:util';
import { generateKey, generateKeyId, hashKey, toPublicRecord, type ApiKeyRecord } from '../keys/api-key.js';
import { KeyNotFoundError, type KeyStore } from '../keys/key-store.js';
import { RedisKeyStore, REPLICA_CONFIRMATION_MS } from '../keys/redis-key-store.js';
import { REDIS_CONNECTION_FIELDS } from '../config/redis-fields.js';
import { CommandError, parseCommandLine, UsageError, wantsHelp } from './command-line.js';
import { withKeyStore } from './key-store-access.js';
import { setting } from './settings.js';
import { keyIdArgument, validAcquirer, validAllowedIps, validDescription, validPermissions } from './key-arguments.js';

const ENVIRONMENT = 'Redis: REDIS_URL (or REDIS_SENTINELS or REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX, KEY_HASH_PEPPER.\nPermissions: the catalogue of POLICY_FILE.';

export const KEYS_USAGE = `usage: acquirer-gateway keys <subcommand> [options]
  create    make a key for an acquirer; its secret is printed this once only
  update    change a key's permissions or IP whitelist
  disable   disable a key, for good
  show      print a key's record
  list      print every key's record, or one acquirer's
  rehash    store every key under its peppered hash (KEY_HASH_PEPPER)
\`acquirer-gateway keys <subcommand> --help\` describes each.
${ENVIRONMENT}`;

export interface KeysContext {
  readonly env: NodeJS.ProcessEnv;
  readonly out: (line: string) => void;
  /** Standard error: what the operator should know beside the record (none: not said). */
  readonly warn?: (line: string) => void;
  /** For tests; otherwise a Redis store from REDIS_URL. */
  readonly store?: KeyStore;
  readonly now?: () => Date;
}

/** What a subcommand does with a store, once its arguments are judged. */
type Run = (store: KeyStore) => Promise<void>;

interface Subcommand {
  readonly usage: string;
  readonly options: ParseArgsOptionsConfig;
  /** The key id it names, or none. */
  readonly takesId: boolean;
  readonly plan: (values: Record<string, string | boolean | undefined>, id: string, ctx: KeysContext) => Promise<Run>;
}

const print = (ctx: KeysContext) => (record: ApiKeyRecord) => ctx.out(JSON.stringify(toPublicRecord(record)));

const SUBCOMMANDS: Readonly<Record<string, Subcommand>> = {
  create: {
    usage: `usage: acquirer-gateway keys create --acquirer ID --permissions P1,P2
                                    [--allow-ip CIDR,…] [--description TEXT]
Makes a key and prints its record with the key itself, shown this once and never again.
  --acquirer ID        the acquirer it acts for: 1 to 64 of a-z 0-9 _ -
  --permissions P1,P2  what it may call, from the policy's permission catalogue
  --allow-ip CIDR,…    the addresses and networks it may be used from (left out: any)
  --description TEXT   what it is for, as \`keys list\` shows it (256 characters)
${ENVIRONMENT}`,
    options: { acquirer: { type: 'string' }, permissions: { type: 'string' }, 'allow-ip': { type: 'string' }, description: { type: 'string' } },
    takesId: false,
    plan: planCreate,
  },
  update: {
    usage: `usage: acquirer-gateway keys update KEY_ID [--permissions P1,P2]
                                           [--allow-ip CIDR,… | --allow-any-ip]
Replaces a key's permissions, its IP whitelist, or both; running gateways are told at once.
  --permissions P1,P2  what it may call from now on, from the policy's permission catalogue
  --allow-ip CIDR,…    the addresses and networks it may be used from from now on
  --allow-any-ip       no whitelist: any address
${ENVIRONMENT}`,
    options: { permissions: { type: 'string' }, 'allow-ip': { type: 'string' }, 'allow-any-ip': { type: 'boolean' } },
    takesId: true,
    plan: planUpdate,
  },
  disable: {
    usage: `usage: acquirer-gateway keys disable KEY_ID
Disables a key for good (it is never enabled again); running gateways refuse it at once.
${ENVIRONMENT}`,
    options: {},
    takesId: true,
    plan: async (_values, id, ctx) => async (store) => print(ctx)(await store.disable(id, (ctx.now ?? (() => new Date()))())),
  },
  show: {
    usage: `usage: acquirer-gateway keys show KEY_ID
Prints a key's record (never the key itself: only its hash is kept).
${ENVIRONMENT}`,
    options: {},
    takesId: true,
    plan: async (_values, id, ctx) => async (store) => {
      const record = await store.findById(id);
      if (record === null) throw new KeyNotFoundError(id);
      print(ctx)(record);
    },
  },
  list: {
    usage: `usage: acquirer-gateway keys list [--acquirer ID]
Prints one record per line, oldest first: every key, or one acquirer's.
${ENVIRONMENT}`,
    options: { acquirer: { type: 'string' } },
    takesId: false,
    plan: planList,
  },
  rehash: {
    usage: `usage: acquirer-gateway keys rehash
Moves every key record still stored under its plain SHA-256 to its peppered hash (KEY_HASH_PEPPER),
one key at a time: safe to interrupt and to run again. Give every gateway KEY_HASH_PEPPER first: one
without it refuses moved keys. Prints {"migrated":…,"already_peppered":…,"unreadable":…}.
KEY_HASH_PEPPER is required.
${ENVIRONMENT}`,
    options: {},
    takesId: false,
    plan: planRehash,
  },
};

async function planCreate(values: Record<string, string | boolean | undefined>, _id: string, ctx: KeysContext): Promise<Run> {
  const acquirer = validAcquirer(values.acquirer as string | undefined);
  const description = validDescription(values.description as string | undefined);
  if (values.permissions === undefined) throw new UsageError('--permissions: required');
  const permissions = await validPermissions(values.permissions as string, ctx.env);
  const allowedIps = values['allow-ip'] === undefined ? [] : validAllowedIps(values['allow-ip'] as string);
  const key = generateKey();
  const now = ctx.now ?? (() => new Date());
  const record: ApiKeyRecord = {
    id: generateKeyId(),
    key_hash: hashKey(key),
    acquirer_id: acquirer,
    permissions,
    allowed_ips: allowedIps,
    description,
    created_at: now().toISOString(),
    disabled_at: null,
  };
  return async (store) => {
    await store.create(record);
    // The only time the secret is shown; the store keeps its hash.
    const { id, ...rest } = toPublicRecord(record);
    ctx.out(JSON.stringify({ id, key, ...rest }));
  };
}

async function planUpdate(values: Record<string, string | boolean | undefined>, id: string, ctx: KeysContext): Promise<Run> {
  const anyIp = values['allow-any-ip'] === true;
  if (anyIp && values['allow-ip'] !== undefined) throw new UsageError('update: --allow-ip and --allow-any-ip contradict each other');
  if (values.permissions === undefined && values['allow-ip'] === undefined && !anyIp) {
    throw new UsageError('update: give --permissions, --allow-ip or --allow-any-ip');
  }
  const changes = {
    ...(values.permissions !== undefined ? { permissions: await validPermissions(values.permissions as string, ctx.env) } : {}),
    ...(values['allow-ip'] !== undefined ? { allowed_ips: validAllowedIps(values['allow-ip'] as string) } : {}),
    ...(anyIp ? { allowed_ips: [] } : {}),
  };
  return async (store) => print(ctx)(await store.update(id, changes));
}

async function planList(values: Record<string, string | boolean | undefined>, _id: string, ctx: KeysContext): Promise<Run> {
  return async (store) => {
    const corrupt: string[] = [];
    for (const record of await store.list(values.acquirer as string | undefined, (what) => corrupt.push(what))) print(ctx)(record);
    if (corrupt.length > 0) {
      throw new CommandError(`${corrupt.length} key record(s) in Redis could not be read (${corrupt.join(', ')}); the gateway refuses a key whose record it cannot read (503)`);
    }
  };
}

async function planRehash(_values: Record<string, string | boolean | undefined>, _id: string, ctx: KeysContext): Promise<Run> {
  if (setting(ctx.env, REDIS_CONNECTION_FIELDS.keyHashPepper) === '') throw new UsageError('rehash: KEY_HASH_PEPPER is not set: it is the secret the records are moved under');
  return async (store) => {
    if (!(store instanceof RedisKeyStore)) throw new CommandError('rehash: only a key store in Redis holds hashes to move');
    const corrupt: string[] = [];
    const outcome = await store.rehash((what) => corrupt.push(what));
    ctx.out(JSON.stringify({ migrated: outcome.migrated, already_peppered: outcome.alreadyPeppered, unreadable: outcome.unreadable }));
    if (corrupt.length > 0) {
      throw new CommandError(`${corrupt.length} key record(s) in Redis could not be read and were left as they are (${corrupt.join(', ')}); repair or delete them, then run keys rehash again`);
    }
  };
}

/** `acquirer-gateway keys …`. */
export async function keysCommand(args: string[], ctx: KeysContext): Promise<void> {
  const [name, ...rest] = args;
  const sub = name === undefined || !Object.hasOwn(SUBCOMMANDS, name) ? undefined : SUBCOMMANDS[name]!;
  if (sub !== undefined && wantsHelp(rest)) return ctx.out(sub.usage);
  if (wantsHelp(args)) return ctx.out(KEYS_USAGE);
  if (sub === undefined) throw new UsageError(name === undefined ? KEYS_USAGE : `unknown keys command "${name}"\n${KEYS_USAGE}`);
  const run = await sub.plan(...parse(sub, rest), ctx);
  await withStore(ctx, run);
}

function parse(sub: Subcommand, args: string[]): [Record<string, string | boolean | undefined>, string] {
  let parsed;
  try {
    parsed = parseCommandLine(args, sub.options, true);
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${sub.usage}`);
  }
  if (parsed.positionals.length !== (sub.takesId ? 1 : 0)) {
    throw new UsageError(`${sub.takesId ? 'expected a key id' : 'no arguments expected'}\n${sub.usage}`);
  }
  return [parsed.values, sub.takesId ? keyIdArgument(parsed.positionals[0]!) : ''];
}

/**
 * PUBLISH reached no subscriber: no gateway on this Redis and prefix is running, or none is
 * subscribed (its notices down). The record is written all the same; the exit code stays 0.
 */
const NOBODY_TOLD =
  'acquirer-gateway: the change is written, and no running gateway received its notice: none is subscribed to this Redis and ' +
  'REDIS_KEY_PREFIX. Gateways started later read it from Redis; a running one that is not subscribed applies it when its cached copy expires (KEY_CACHE_TTL_MS).';

/**
 * Replication is asynchronous: a change only the primary holds is lost if it fails before passing
 * it on, and the promoted replica serves the key as it was. The exit code stays 0: it is written.
 */
const NO_REPLICA_CONFIRMED =
  `acquirer-gateway: the change is written on the primary, and no replica confirmed it within ${REPLICA_CONFIRMATION_MS / 1000} s: ` +
  'if the primary fails now it may be lost with it. Run the command again after a failover.';
const NO_REPLICA_AT_ALL =
  'acquirer-gateway: the change is written on the primary, which has no replica now: if it fails before one catches up, ' +
  'the change may be lost with it. Run the command again after a failover.';
const NO_REPLICA_KNOWN = 'acquirer-gateway: the change is written, and whether a replica holds it could not be asked with ROLE and WAIT';

/** Runs `run` against the store (key-store-access.ts), saying what a written change could not reach. */
function withStore(ctx: KeysContext, run: Run): Promise<void> {
  return withKeyStore(ctx.env, run, {
    store: ctx.store,
    hooks: (target) => ({
      onAnnounced: (receivers) => {
        if (receivers === 0) ctx.warn?.(NOBODY_TOLD);
      },
      onReplicated: (outcome) => {
        if ('unknown' in outcome) ctx.warn?.(`${NO_REPLICA_KNOWN}: ${outcome.unknown}`);
        else if (outcome.replicas > 0 && !outcome.confirmed) ctx.warn?.(NO_REPLICA_CONFIRMED);
        // One Redis by URL may have no replica by design; a Sentinel's or a Cluster's primary without one is mid-failover, or alone.
        else if (outcome.replicas === 0 && target.mode !== 'url') ctx.warn?.(NO_REPLICA_AT_ALL);
      },
    }),
  });
}
