/**
 * @module
 * The settings that say where the key store's Redis is, how to reach it, and how keys are named in
 * it (keys/redis-target.ts builds the connection from them; load-config.ts checks how they combine).
 */
import { z } from 'zod';
import { DEFAULT_REDIS_KEY_PREFIX, DEFAULT_REDIS_URL } from './defaults.js';
import { field } from './field.js';
import { booleanText, hostPortList, redisUrl } from './setting-types.js';

export const REDIS_CONNECTION_FIELDS = {
  redisUrl: field({
    env: 'REDIS_URL',
    default: DEFAULT_REDIS_URL,
    summary: 'the key store: redis://host:port/db',
    description:
      'The key store. Its user and password are never echoed: errors name only its scheme, host and port. The database is the path\'s number (`redis://redis:6379/2`) or nothing (0); any other path, and any query (ioredis would take `?db=` or `?password=` from it), is refused. A database this Redis refuses (`ERR DB index is out of range`) leaves the key store unavailable, logged at `warn` and tried again every second (every key answers 503; key commands fail with the reason): ioredis would otherwise go on on database 0, another set of keys. Key commands connect once and never reconnect: on a new connection ioredis would send what was queued before a refused database could be noticed.',
    schema: redisUrl,
    secret: true,
  }),
  redisSentinels: field({
    env: 'REDIS_SENTINELS',
    default: '',
    summary: 'Redis Sentinels host:port,…, instead of REDIS_URL',
    description:
      'Redis through Sentinel: `host:port,…` of the Sentinels, with `REDIS_SENTINEL_NAME`. When set, `REDIS_URL` is not used: the primary is the one the Sentinels name, asked again after each failover (database 0; `REDIS_USERNAME`, `REDIS_PASSWORD` and `REDIS_TLS` apply to it). See operations, "Redis that fails over".',
    schema: hostPortList,
  }),
  redisSentinelName: field({
    env: 'REDIS_SENTINEL_NAME',
    default: '',
    summary: 'the primary\'s name the Sentinels monitor',
    description: 'The name the Sentinels monitor the primary by (`sentinel monitor <name> …`); required with `REDIS_SENTINELS`.',
    schema: z.string().regex(/^[A-Za-z0-9._-]{0,64}$/, 'must be a Sentinel master name (letters, digits, . _ -)'),
  }),
  redisSentinelUsername: field({
    env: 'REDIS_SENTINEL_USERNAME',
    default: '',
    summary: 'ACL user on the Sentinels, if they require one',
    description: 'The ACL user to authenticate to the Sentinels with, if they require one (their own `user` lines, apart from the data nodes\').',
    schema: z.string().max(256),
  }),
  redisSentinelPassword: field({
    env: 'REDIS_SENTINEL_PASSWORD',
    default: '',
    summary: 'password of the Sentinels (requirepass or ACL)',
    description: 'The Sentinels\' password (`requirepass`, or the ACL user\'s), if they require one. Never echoed.',
    schema: z.string().max(1024),
    secret: true,
  }),
  redisClusterNodes: field({
    env: 'REDIS_CLUSTER_NODES',
    default: '',
    summary: 'Redis Cluster nodes host:port,…, instead of REDIS_URL',
    description:
      'Redis Cluster: `host:port,…` of some of its nodes to start from (ioredis learns the rest). When set, `REDIS_URL` is not used, and `REDIS_KEY_PREFIX` must hold a hash tag (`{acquirer-gateway}:`) so that every key and the notice channel share one slot. `REDIS_USERNAME`, `REDIS_PASSWORD` and `REDIS_TLS` apply to every node. See operations, "Redis that fails over".',
    schema: hostPortList,
  }),
  redisUsername: field({
    env: 'REDIS_USERNAME',
    default: '',
    summary: 'ACL user on the Redis data nodes',
    description: 'The ACL user for the Redis that holds the keys, in every mode. With `REDIS_URL`, the user may be in the URL instead, not in both.',
    schema: z.string().max(256),
  }),
  redisPassword: field({
    env: 'REDIS_PASSWORD',
    default: '',
    summary: 'password on the Redis data nodes',
    description: 'The password for the Redis that holds the keys, in every mode (from a secret store, rather than in a URL). With `REDIS_URL`, the password may be in the URL instead, not in both. Never echoed.',
    schema: z.string().max(1024),
    secret: true,
  }),
  redisTls: field({
    env: 'REDIS_TLS',
    default: 'false',
    summary: 'TLS to Redis (and its Sentinels)',
    description: 'Connect to Redis over TLS, and to the Sentinels too in Sentinel mode; `rediss://` in `REDIS_URL` means the same. Certificates are checked against the system\'s CAs, or `REDIS_TLS_CA_FILE`.',
    schema: booleanText,
  }),
  redisTlsCaFile: field({
    env: 'REDIS_TLS_CA_FILE',
    default: '',
    summary: 'PEM file of the CA that signed Redis\'s certificate',
    description: 'A PEM file of the CA (or CAs) that signed the certificates of Redis and its Sentinels, in place of the system\'s; read at start-up.',
    schema: z.string(),
  }),
  redisKeyPrefix: field({
    env: 'REDIS_KEY_PREFIX',
    default: DEFAULT_REDIS_KEY_PREFIX,
    summary: 'namespace of every Redis key and channel used',
    description:
      'Namespace of every Redis key and channel the gateway uses. In Cluster mode it must hold a hash tag, a non-empty `{…}` (`{acquirer-gateway}:`): Redis then keeps every key under it in one slot, so that a key\'s creation is one transaction.',
    schema: z.string().min(1, 'must not be empty'),
  }),
  keyHashPepper: field({
    env: 'KEY_HASH_PEPPER',
    default: '',
    summary: 'secret keying the stored key hashes (none)',
    description:
      'When set, key records are stored and looked up under HMAC-SHA256(pepper, SHA-256 of the key), so that a dump of Redis alone cannot be checked against candidate keys; lookups read that form and the plain SHA-256 one, so keys created before it keep working until `keys rehash` moves them. `serve` and every `keys` command read it; set it on every gateway before running `keys rehash` or creating keys with it (a gateway without it refuses peppered keys, 401). It cannot be changed once records are peppered. At least 32 characters, with no white space. Never echoed or logged. See security, "Key hashes and the pepper".',
    schema: z.string().refine((text) => text === '' || /^[^\s\p{Cc}]{32,1024}$/u.test(text), 'must be empty (none) or 32 to 1024 characters with no white space or control character'),
    secret: true,
  }),
};

/**
 * Redis Cluster hashes only a key's hash tag, the text between its first `{` and the first `}` after
 * it, when that is not empty: a prefix that holds one puts every key under it in one slot.
 */
export function hashTagOf(prefix: string): string | null {
  const open = prefix.indexOf('{');
  const close = open < 0 ? -1 : prefix.indexOf('}', open + 1);
  return close > open + 1 ? prefix.slice(open + 1, close) : null;
}
