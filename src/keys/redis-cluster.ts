/**
 * @module
 * What Cluster mode adds to the key store's connections (redis-connections.ts). Every key lives in
 * the slot of REDIS_KEY_PREFIX's hash tag, so commands go where ioredis routes them. Change notices
 * use classic pub/sub: a Cluster hands a PUBLISH to every node, so a subscriber on any live node
 * hears it, and a failover never unsubscribes it (docs/operations.md, "Redis that fails over").
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { HostPort } from '../config/setting-types.js';

/** How often a gateway asks the Cluster which node serves which slot, besides on a MOVED reply. */
const SLOTS_REFRESH_INTERVAL_MS = 1000;

/**
 * A Cluster client whose node connections take `node` (credentials, TLS, timeouts). `waiting`: key
 * administration, which queues until connected and gives up after a few tries; a gateway fails fast
 * and tries again forever.
 */
export function openCluster(nodes: readonly HostPort[], node: RedisOptions, waiting: boolean, maxDelayMs: number): Cluster {
  const { enableOfflineQueue: _queue, retryStrategy: _retry, lazyConnect: _lazy, ...redisOptions } = node;
  const options: ClusterOptions = {
    enableOfflineQueue: waiting,
    lazyConnect: waiting,
    clusterRetryStrategy: waiting ? (times) => (times > 3 ? null : 200) : (times) => Math.min(times * 100, maxDelayMs),
    slotsRefreshInterval: SLOTS_REFRESH_INTERVAL_MS,
    slotsRefreshTimeout: 1000,
    redisOptions,
  };
  return new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    options,
  );
}

/**
 * The nodes a change-notice subscriber may connect to: every node the Cluster named (primaries and
 * replicas alike), never a configured one it did not name.
 */
export function subscriberCandidates(cluster: Cluster): HostPort[] {
  return cluster.nodes('all').map((node) => ({ host: node.options.host!, port: node.options.port! }));
}

/**
 * How many connections are subscribed to `channel` across the Cluster. A PUBLISH counts only the
 * receivers on the node it ran on, so each node is asked; one that does not answer counts none.
 * Every node CLUSTER NODES names, on a connection of its own: the client's pool holds only those
 * CLUSTER SLOTS lists, which leaves out a replica still syncing (a demoted primary, just after a
 * failover, with its subscribers). Subscribed is not delivered: a notice lost between nodes is
 * caught by the change counter.
 */
export async function clusterSubscribers(cluster: Cluster, channel: string): Promise<number> {
  const nodes = String(await cluster.cluster('NODES'))
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => fields.length > 2 && !/fail|noaddr|handshake/.test(fields[2]!))
    .map((fields) => fields[1]!.split('@')[0]!);
  const counts = await Promise.allSettled(
    nodes.map(async (address) => {
      const at = address.lastIndexOf(':');
      const node = new Redis({ ...cluster.options.redisOptions, host: address.slice(0, at), port: Number(address.slice(at + 1)), lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      try {
        return ((await node.call('PUBSUB', 'NUMSUB', channel)) as unknown[])[1];
      } finally {
        node.disconnect();
      }
    }),
  );
  return counts.reduce((sum, count) => sum + (count.status === 'fulfilled' ? Number(count.value) : 0), 0);
}

/**
 * The connection to the primary serving `key`'s slot: the one a command on `key` went through, so
 * the one whose writes WAIT counts.
 */
export async function primaryServing(cluster: Cluster, key: string): Promise<Redis> {
  const slot = Number(await cluster.cluster('KEYSLOT', key));
  const nodeKey = cluster.slots[slot]?.[0];
  const primary = cluster.nodes('master').find((node) => `${node.options.host}:${node.options.port}` === nodeKey);
  if (primary === undefined) throw new Error(`no primary known for slot ${slot}`);
  return primary;
}
