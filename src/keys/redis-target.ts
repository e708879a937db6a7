/**
 * @module
 * Where the key store's Redis is, and how to reach it: one URL, the primary that Sentinels name
 * (ioredis asks them again after every failover), or a Cluster's nodes. Credentials and TLS apply
 * alike in the three modes.
 */
import { readFileSync } from 'node:fs';
import type { RedisOptions } from 'ioredis';
import type { HostPort } from '../config/setting-types.js';

/** The settings it is built from, as `serve` and the key commands read them (config/env.ts). */
export interface RedisSettings {
  readonly redisUrl: string;
  readonly redisSentinels: readonly HostPort[];
  readonly redisClusterNodes: readonly HostPort[];
  readonly redisSentinelName: string;
  readonly redisSentinelUsername: string;
  readonly redisSentinelPassword: string;
  readonly redisUsername: string;
  readonly redisPassword: string;
  readonly redisTls: boolean;
  readonly redisTlsCaFile: string;
}

export interface RedisTarget {
  /** How Redis is reached: the one decision the connections and key commands follow. */
  readonly mode: 'url' | 'sentinel' | 'cluster';
  /** REDIS_URL, or undefined in Sentinel and Cluster modes. */
  readonly url: string | undefined;
  /** Cluster mode: the nodes to start from; undefined otherwise. */
  readonly clusterNodes?: readonly HostPort[];
  /** What ioredis needs besides the URL: Sentinels, credentials, TLS (for every node in Cluster mode). */
  readonly options: RedisOptions;
  /** For messages: the mode and hosts, never a user or password. */
  readonly description: string;
}

/** Throws an Error naming the variable when the CA file cannot be read. */
export function redisTarget(settings: RedisSettings): RedisTarget {
  const credentials: RedisOptions = {
    ...(settings.redisUsername !== '' ? { username: settings.redisUsername } : {}),
    ...(settings.redisPassword !== '' ? { password: settings.redisPassword } : {}),
  };
  const urlMode = settings.redisSentinels.length === 0 && settings.redisClusterNodes.length === 0;
  const tls = settings.redisTls || (urlMode && settings.redisUrl.startsWith('rediss:'));
  let ca: Buffer | undefined;
  if (settings.redisTlsCaFile !== '') {
    try {
      ca = readFileSync(settings.redisTlsCaFile);
    } catch (err) {
      throw new Error(`REDIS_TLS_CA_FILE: cannot read ${settings.redisTlsCaFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  const tlsOptions: RedisOptions = tls ? { tls: ca === undefined ? {} : { ca } } : {};
  if (urlMode) return { ...urlTarget(settings.redisUrl), options: { ...credentials, ...tlsOptions } };
  if (settings.redisClusterNodes.length > 0) {
    return {
      mode: 'cluster',
      url: undefined,
      clusterNodes: settings.redisClusterNodes,
      options: { ...credentials, ...tlsOptions },
      description: `cluster via ${hostList(settings.redisClusterNodes)}`,
    };
  }
  return {
    mode: 'sentinel',
    url: undefined,
    options: {
      sentinels: settings.redisSentinels.map(({ host, port }) => ({ host, port })),
      name: settings.redisSentinelName,
      ...(settings.redisSentinelUsername !== '' ? { sentinelUsername: settings.redisSentinelUsername } : {}),
      ...(settings.redisSentinelPassword !== '' ? { sentinelPassword: settings.redisSentinelPassword } : {}),
      ...credentials,
      ...tlsOptions,
      ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: ca === undefined ? {} : { ca } } : {}),
    },
    description: `sentinel ${settings.redisSentinelName} via ${hostList(settings.redisSentinels)}`,
  };
}

/** A plain REDIS_URL with nothing else set (key administration in tests and the benchmark). */
export function urlTarget(url: string): RedisTarget {
  const parsed = new URL(url);
  return { mode: 'url', url, options: {}, description: `${parsed.protocol}//${parsed.host}` };
}

const hostList = (nodes: readonly HostPort[]) => nodes.map(({ host, port }) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`)).join(',');
