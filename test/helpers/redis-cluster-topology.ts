import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions, type RedisOptions } from 'ioredis';
import { waitFor } from './wait.js';
import type { RedisTls } from './redis-tls.js';
import { HOST, RedisProcesses, adminCall, dataNodeArgs, key, parseHostPort, requireBinary, roleOf, type HostPort, type RedisAuth } from './redis-topology.js';

export interface RedisClusterOptions extends Omit<RedisAuth, 'tls'> {
  /** TLS only on every node (no plain port), the cluster bus and replication over TLS too (makeRedisTls). */
  tls?: RedisTls;
}

/** Three primaries with one replica each, every slot covered, on loopback. */
export interface RedisClusterTopology {
  /** The primaries when the cluster was made (startup nodes for a client). */
  readonly nodes: HostPort[];
  /** Every node that has not been killed, primaries and replicas. */
  running(): HostPort[];
  /** The primary serving the slot of `key`, as a running node sees it now. */
  ownerOf(key: string): Promise<HostPort>;
  /** SIGKILLs one node (it stays dead); its replica takes over its slots in a few seconds. */
  killNode(node: string | HostPort): Promise<void>;
  /** CLUSTER FAILOVER on the replica of the primary serving `key`: returns that replica, the next owner. */
  failoverSlotOwner(key: string): Promise<HostPort>;
  /** Waits until every running node says the slot of `key` is served by a primary other than `old`, that answers ROLE as master, and the cluster is ok. */
  waitForOwnerChange(key: string, old: HostPort, timeoutMs?: number): Promise<HostPort>;
  /** A Cluster client for assertions (auth and TLS filled in); disconnected by stop(). */
  client(options?: ClusterOptions): Cluster;
  stop(): Promise<void>;
}

const NODE_TIMEOUT_MS = 1000;

type SlotRange = [number, number, ...[string, number, string?][]];

/** What a node says of the cluster, asked on a fresh connection each time (adminCall). */
function clusterQueries(auth: RedisAuth) {
  return {
    slotsOf: async (at: HostPort) => (await adminCall(at, auth, 'CLUSTER', 'SLOTS')) as SlotRange[],
    stateOf: async (at: HostPort) => String(await adminCall(at, auth, 'CLUSTER', 'INFO')),
    slotOf: async (at: HostPort, k: string) => Number(await adminCall(at, auth, 'CLUSTER', 'KEYSLOT', k)),
  };
}

const primaryOf = (range: SlotRange): HostPort => ({ host: String(range[2]![0]), port: Number(range[2]![1]) });

const ownerIn = (ranges: SlotRange[], slot: number): HostPort | undefined => {
  const range = ranges.find(([from, to]) => from <= slot && slot <= to);
  return range === undefined ? undefined : primaryOf(range);
};

/** Six cluster-enabled nodes, not yet a cluster; their ports (with TLS, their TLS ports: the bus is then TLS port + 10000). */
async function startNodes(processes: RedisProcesses, auth: RedisAuth, tls: RedisTls | undefined): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < 6; i++) {
    const port = await processes.start(
      'redis-server',
      (port) => [
        ...(tls === undefined ? ['--port', String(port)] : [...tls.serverArgs(port), '--tls-cluster', 'yes']),
        '--dir', processes.dir, ...dataNodeArgs(auth),
        '--cluster-enabled', 'yes', '--cluster-config-file', `${processes.dir}/nodes-${port}.conf`,
        '--cluster-node-timeout', String(NODE_TIMEOUT_MS), '--cluster-replica-validity-factor', '0',
      ],
      true,
    );
    ports.push(port);
  }
  return ports;
}

/** `redis-cli --cluster create` over the nodes (over TLS, trusting the CA only, when `tls`): one replica per primary. */
async function createCluster(ports: number[], options: RedisClusterOptions): Promise<void> {
  const cliAuth = [
    ...(options.username !== undefined ? ['--user', options.username] : []),
    ...(options.password !== undefined ? ['-a', options.password, '--no-auth-warning'] : []),
    ...(options.tls !== undefined ? ['--tls', '--cacert', options.tls.caFile] : []),
  ];
  await promisify(execFile)(
    'redis-cli',
    [...cliAuth, '--cluster', 'create', ...ports.map((port) => `${HOST}:${port}`), '--cluster-replicas', '1', '--cluster-yes'],
    { timeout: 30_000 },
  ).catch((err: Error & { stdout?: string; stderr?: string }) => {
    throw new Error(`redis-cli --cluster create failed: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  });
}

/** Until every node says the cluster is ok, every slot covered by a primary and its replica, every replica in sync. */
async function waitForClusterOk(nodes: HostPort[], auth: RedisAuth): Promise<void> {
  const { slotsOf, stateOf } = clusterQueries(auth);
  await waitFor(
    async () => {
      for (const at of nodes) {
        const info = await stateOf(at);
        if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info) || !/cluster_known_nodes:6/.test(info)) return false;
        const ranges = await slotsOf(at);
        if (ranges.reduce((n, [from, to]) => n + to - from + 1, 0) !== 16384 || ranges.some((range) => range.length !== 4)) return false;
        const role = (await adminCall(at, auth, 'ROLE')) as unknown[];
        if (role[0] === 'slave' && role[3] !== 'connected') return false;
      }
      return true;
    },
    { timeoutMs: 20_000, intervalMs: 50, what: 'the cluster to be ok, every slot covered and every replica in sync' },
  );
}

/**
 * Six nodes made a cluster, three primaries with a replica each. With `tls`, every node listens with
 * TLS only, and the cluster bus and replication between nodes are over TLS too.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterTopology> {
  requireBinary('redis-server', 'redis-server');
  requireBinary('redis-cli', 'redis-tools');
  const auth: RedisAuth = { username: options.username, password: options.password, tls: options.tls?.client };
  const processes = new RedisProcesses('agw-cluster-', options.tls?.client);
  let ports: number[];
  try {
    ports = await startNodes(processes, auth, options.tls);
    await createCluster(ports, options);
    await waitForClusterOk(ports.map((port) => ({ host: HOST, port })), auth);
  } catch (err) {
    await processes.stop();
    throw err;
  }
  const nodeOptions: RedisOptions = { username: options.username, password: options.password, ...(options.tls === undefined ? {} : { tls: options.tls.client }) };
  return clusterTopology(processes, ports, auth, nodeOptions).catch(async (err: unknown) => {
    await processes.stop();
    throw err;
  });
}

/** The topology of a cluster made and ok: its queries and faults; `nodeOptions`, its client's per-node options. */
async function clusterTopology(processes: RedisProcesses, ports: number[], auth: RedisAuth, nodeOptions: RedisOptions): Promise<RedisClusterTopology> {
  const { slotsOf, stateOf, slotOf } = clusterQueries(auth);
  const clients: Cluster[] = [];
  const running = () => ports.filter((port) => processes.isRunning(port)).map((port) => ({ host: HOST, port }));
  const primaries = (await slotsOf(running()[0]!)).map(primaryOf);

  const topology: RedisClusterTopology = {
    nodes: primaries.filter((at, i) => primaries.findIndex((other) => key(other) === key(at)) === i),
    running,
    async ownerOf(k) {
      const slot = await slotOf(running()[0]!, k);
      return waitFor(async () => {
        for (const at of running()) {
          const owner = await slotsOf(at).then((ranges) => ownerIn(ranges, slot), () => undefined);
          if (owner !== undefined) return owner;
        }
        return undefined;
      }, { what: `a node to name the owner of slot ${slot}` });
    },
    async killNode(node) {
      await processes.kill(parseHostPort(node).port);
    },
    async failoverSlotOwner(k) {
      const owner = await topology.ownerOf(k);
      const id = String(await adminCall(owner, auth, 'CLUSTER', 'MYID'));
      const replicas = (await adminCall(owner, auth, 'CLUSTER', 'REPLICAS', id)) as string[];
      const address = replicas[0]?.split(' ')[1]?.split('@')[0];
      if (address === undefined) throw new Error(`${key(owner)} has no replica to fail over to`);
      const replica = parseHostPort(address);
      const reply = await adminCall(replica, auth, 'CLUSTER', 'FAILOVER');
      if (reply !== 'OK') throw new Error(`CLUSTER FAILOVER on ${address} answered ${String(reply)}`);
      return replica;
    },
    async waitForOwnerChange(k, old, timeoutMs = 30_000) {
      const slot = await slotOf(running()[0]!, k);
      return waitFor(
        async () => {
          const live = running();
          const owners = await Promise.all(live.map(async (at) => ((await stateOf(at)).includes('cluster_state:ok') ? ownerIn(await slotsOf(at), slot) : undefined)));
          const first = owners[0];
          if (first === undefined || key(first) === key(old) || owners.some((o) => o === undefined || key(o) !== key(first))) return undefined;
          return (await roleOf(first, auth)) === 'master' ? first : undefined;
        },
        { timeoutMs, intervalMs: 50, what: `every node to name an owner of slot ${slot} other than ${key(old)}` },
      );
    },
    client(options: ClusterOptions = {}) {
      const client = new Cluster(topology.nodes, { ...options, redisOptions: { ...nodeOptions, ...options.redisOptions } });
      client.on('error', () => {}); // node failures are expected here; a test adds its own listener to see them
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients.splice(0)) client.disconnect();
      await processes.stop();
    },
  };
  return topology;
}
