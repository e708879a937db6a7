import { Redis, type RedisOptions } from 'ioredis';
import { waitFor } from './wait.js';
import type { RedisTls } from './redis-tls.js';
import { HOST, RedisProcesses, adminCall, dataNodeArgs, key, onPath, requireBinary, roleOf, type HostPort, type RedisAuth } from './redis-topology.js';

export interface SentinelTopologyOptions extends Omit<RedisAuth, 'tls'> {
  /** requirepass on the sentinels (and sentinel-pass, so they still talk to each other). */
  sentinelPassword?: string;
  /** TLS only, on the data nodes and the sentinels, between them too (makeRedisTls). */
  tls?: RedisTls;
}

/** A primary, one replica and three sentinels (quorum 2) monitoring them as `mymaster`, on loopback. */
export interface SentinelTopology {
  readonly sentinels: HostPort[];
  readonly name: string;
  /** The primary, as a sentinel names it now. */
  primary(): Promise<HostPort>;
  /** SIGKILLs the current primary (it stays dead); the sentinels then fail over in a few seconds. */
  killPrimary(): Promise<void>;
  /**
   * SENTINEL FAILOVER: the replica is promoted at once; the old primary keeps running and stays a
   * writable master until the sentinels convert it to a replica, about 10 s later (then they kill its clients).
   */
  failover(): Promise<void>;
  /**
   * Waits until the primary has a replica in sync that every sentinel knows as a healthy replica
   * (after a failover by hand, once they have converted the old primary): ready for the next failover.
   */
  waitForReplica(timeoutMs?: number): Promise<void>;
  /** Waits until every sentinel names a primary other than `old`, and that it answers ROLE as master. */
  waitForNewPrimary(old: HostPort, timeoutMs?: number): Promise<HostPort>;
  /** A client through the sentinels, for assertions; disconnected by stop(). */
  client(options?: RedisOptions): Redis;
  stop(): Promise<void>;
}

const NAME = 'mymaster';
const DOWN_AFTER_MS = 1000;
const FAILOVER_TIMEOUT_MS = 3000;

export async function startSentinelTopology(options: SentinelTopologyOptions = {}): Promise<SentinelTopology> {
  requireBinary('redis-server', 'redis-server redis-sentinel');
  const sentinelCommand = onPath('redis-sentinel') ? 'redis-sentinel' : 'redis-server';
  const auth: RedisAuth = { username: options.username, password: options.password, tls: options.tls?.client };
  const sentinelAuth: RedisAuth = { password: options.sentinelPassword, tls: options.tls?.client };
  const processes = new RedisProcesses('agw-sentinel-', options.tls?.client);
  const portArgs = (port: number) => options.tls?.serverArgs(port) ?? ['--port', String(port)];
  const clients: Redis[] = [];
  const sentinels: HostPort[] = [];

  const askSentinel = (at: HostPort, ...args: string[]) => adminCall(at, sentinelAuth, 'SENTINEL', ...args);
  const namedBy = async (at: HostPort): Promise<HostPort> => {
    const [host, port] = (await askSentinel(at, 'GET-MASTER-ADDR-BY-NAME', NAME)) as [string, string];
    return { host, port: Number(port) };
  };
  const onEverySentinel = (what: string, check: (at: HostPort) => Promise<boolean>): Promise<true> =>
    waitFor(async () => (await Promise.all(sentinels.map(check))).every(Boolean), { timeoutMs: 15_000, intervalMs: 50, what });

  try {
    const primaryPort = await processes.start('redis-server', (port) => [...portArgs(port), '--dir', processes.dir, ...dataNodeArgs(auth)]);
    await processes.start('redis-server', (port) => [
      ...portArgs(port), '--dir', processes.dir, ...dataNodeArgs(auth), '--replicaof', HOST, String(primaryPort),
    ]);
    // The sentinels learn of the replica from the primary's INFO, first asked on connecting (then every 10 s).
    await waitFor(
      async () => /slave0:.*state=online/.test(String(await adminCall({ host: HOST, port: primaryPort }, auth, 'INFO', 'replication'))),
      { timeoutMs: 10_000, intervalMs: 50, what: 'the replica to be in sync with the primary' },
    );

    for (let i = 0; i < 3; i++) {
      const port = await processes.start(sentinelCommand, (port) => {
        const lines = [
          ...(options.tls?.sentinelLines(port) ?? [`port ${port}`]),
          `bind ${HOST}`,
          `dir ${processes.dir}`,
          `sentinel monitor ${NAME} ${HOST} ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${NAME} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${NAME} ${FAILOVER_TIMEOUT_MS}`,
          `sentinel parallel-syncs ${NAME} 1`,
        ];
        if (options.username !== undefined) lines.push(`sentinel auth-user ${NAME} ${options.username}`);
        if (options.password !== undefined) lines.push(`sentinel auth-pass ${NAME} ${options.password}`);
        if (options.sentinelPassword !== undefined) {
          lines.push(`requirepass ${options.sentinelPassword}`, `sentinel sentinel-pass ${options.sentinelPassword}`);
        }
        const file = processes.writeFile(`sentinel-${port}.conf`, lines.join('\n') + '\n');
        return sentinelCommand === 'redis-sentinel' ? [file] : [file, '--sentinel'];
      });
      sentinels.push({ host: HOST, port });
    }
    // Ready for a failover once every sentinel knows the replica and the two other sentinels.
    await onEverySentinel('every sentinel to know the replica and the other sentinels', async (at) => {
      const master = (await askSentinel(at, 'MASTER', NAME)) as string[];
      const fields = new Map<string, string>();
      for (let i = 0; i + 1 < master.length; i += 2) fields.set(master[i]!, master[i + 1]!);
      return fields.get('num-slaves') === '1' && fields.get('num-other-sentinels') === '2' && fields.get('flags') === 'master';
    });
  } catch (err) {
    await processes.stop();
    throw err;
  }

  const topology: SentinelTopology = {
    sentinels,
    name: NAME,
    async primary() {
      return waitFor(async () => {
        for (const at of sentinels) {
          try {
            return await namedBy(at);
          } catch {
            // this sentinel is not answering: ask the next one
          }
        }
        return undefined;
      }, { what: 'a sentinel to name the primary' });
    },
    async killPrimary() {
      const { port } = await topology.primary();
      await processes.kill(port);
    },
    async failover() {
      const reply = await askSentinel(sentinels[0]!, 'FAILOVER', NAME);
      if (reply !== 'OK') throw new Error(`SENTINEL FAILOVER answered ${String(reply)}`);
    },
    async waitForReplica(timeoutMs = 30_000) {
      await waitFor(
        async () => {
          const primary = await topology.primary();
          if (!/slave0:.*state=online/.test(String(await adminCall(primary, auth, 'INFO', 'replication')))) return false;
          const known = await Promise.all(sentinels.map(async (at) => (await askSentinel(at, 'REPLICAS', NAME)) as string[][]));
          return known.every((replicas) => replicas.some((fields) => fields[fields.indexOf('flags') + 1] === 'slave'));
        },
        { timeoutMs, intervalMs: 100, what: 'the primary to have a replica in sync that every sentinel knows' },
      );
    },
    async waitForNewPrimary(old, timeoutMs = 30_000) {
      return waitFor(
        async () => {
          const named = await Promise.all(sentinels.map((at) => namedBy(at).catch(() => undefined)));
          const votes = new Map<string, number>();
          for (const at of named) if (at !== undefined && key(at) !== key(old)) votes.set(key(at), (votes.get(key(at)) ?? 0) + 1);
          // Every sentinel, not a majority: a client asks the first that answers, which may lag the others.
          const winner = [...votes].find(([, count]) => count === sentinels.length);
          if (winner === undefined) return undefined;
          const candidate = named.find((at) => at !== undefined && key(at) === winner[0])!;
          return (await roleOf(candidate, auth)) === 'master' ? candidate : undefined;
        },
        { timeoutMs, intervalMs: 50, what: `every sentinel to name a primary other than ${key(old)}` },
      );
    },
    client(extra: RedisOptions = {}) {
      const client = new Redis({
        sentinels,
        name: NAME,
        username: options.username,
        password: options.password,
        sentinelPassword: options.sentinelPassword,
        ...(options.tls === undefined ? {} : { tls: options.tls.client, enableTLSForSentinelMode: true, sentinelTLS: options.tls.client }),
        ...extra,
      });
      client.on('error', () => {}); // reconnects are expected here; a test adds its own listener to see them
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
