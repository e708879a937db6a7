import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls, { type ConnectionOptions } from 'node:tls';
import { Redis } from 'ioredis';
import { freePort } from './redis.js';
import { waitFor } from './wait.js';

/**
 * Throwaway Redis topologies for tests, on loopback: a Sentinel one (startSentinelTopology, in
 * redis-sentinel-topology.ts) and a Cluster one (startRedisCluster, in redis-cluster-topology.ts),
 * both exported from here too. Below, their shared machinery: redis processes on free ports in a
 * temporary directory, and one-shot admin commands to them.
 */
export { startSentinelTopology, type SentinelTopology, type SentinelTopologyOptions } from './redis-sentinel-topology.js';
export { startRedisCluster, type RedisClusterOptions, type RedisClusterTopology } from './redis-cluster-topology.js';

export interface HostPort {
  host: string;
  port: number;
}

export interface RedisAuth {
  /** An ACL user made on every data node (the `default` user is then switched off). */
  username?: string;
  /** The password of `username`, or of the `default` user (requirepass) when there is no username. */
  password?: string;
  /** When the servers listen with TLS only (redis-tls.ts): how clients reach them (adminCall). */
  tls?: ConnectionOptions;
}

export const HOST = '127.0.0.1';

export const key = ({ host, port }: HostPort): string => `${host}:${port}`;

export function parseHostPort(hostPort: string | HostPort): HostPort {
  if (typeof hostPort !== 'string') return hostPort;
  const at = hostPort.lastIndexOf(':');
  return { host: hostPort.slice(0, at), port: Number(hostPort.slice(at + 1)) };
}

/** True when `binary --version` runs. */
export function onPath(binary: string): boolean {
  return spawnSync(binary, ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Throws the error a test shows when a binary is missing, naming the Debian package that has it. */
export function requireBinary(binary: string, debianPackage: string): void {
  if (!onPath(binary)) {
    throw new Error(`${binary} is not on PATH: this Redis topology needs it (Debian: apt-get install ${debianPackage})`);
  }
}

/**
 * Config directives for a data node: no persistence; replicas synced at once (not after the default
 * 5 s diskless-sync delay) and their offset moving every second (a cluster lists a replica in CLUSTER
 * SLOTS only once its offset is not 0); the auth of `auth` (for clients and for replication).
 */
export function dataNodeArgs(auth: RedisAuth): string[] {
  const args = ['--bind', HOST, '--save', '', '--appendonly', 'no', '--repl-diskless-sync-delay', '0', '--repl-ping-replica-period', '1', '--loglevel', 'warning'];
  if (auth.username !== undefined) {
    const password = auth.password === undefined ? 'nopass' : `>${auth.password}`;
    args.push('--user', auth.username, 'on', password, '~*', '&*', '+@all', '--user', 'default', 'off');
    args.push('--masteruser', auth.username);
  } else if (auth.password !== undefined) {
    args.push('--requirepass', auth.password);
  }
  if (auth.password !== undefined) args.push('--masterauth', auth.password);
  return args;
}

/** One PING over a plain socket (or TLS): true once the server answers at all (+PONG, or -NOAUTH when it wants a password). */
function answers(port: number, withTls?: ConnectionOptions): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = withTls === undefined ? net.connect(port, HOST) : tls.connect({ ...withTls, port, host: HOST });
    let reply = '';
    socket.on('data', (d: Buffer) => {
      reply += d.toString();
      if (reply.includes('\r\n')) socket.end();
    });
    socket.on('error', () => resolve(false));
    socket.on('close', () => resolve(reply.startsWith('+PONG') || reply.startsWith('-NOAUTH')));
    socket.write('PING\r\n');
  });
}

/** Whether something else already listens on the port (the cluster bus port is port + 10000). */
function portTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(true));
    server.listen(port, HOST, () => server.close(() => resolve(false)));
  });
}

/** The redis processes of one topology and the temporary directory holding their files. */
export class RedisProcesses {
  readonly dir: string;
  private readonly tls: ConnectionOptions | undefined;
  private readonly children = new Map<number, ChildProcess>();
  /** Should the test process exit without stop(), its redis processes and files go with it. */
  private readonly killAll = () => {
    for (const child of this.children.values()) child.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  };

  /** `tls`: the processes listen with TLS only (redis-tls.ts), and are asked over it whether they answer. */
  constructor(prefix: string, tls?: ConnectionOptions) {
    this.dir = mkdtempSync(path.join(tmpdir(), prefix));
    this.tls = tls;
    process.once('exit', this.killAll);
  }

  /**
   * Starts `command` with the arguments made for a free port (and port + 10000 free too when
   * `withBusPort`), and waits until it answers PING. A port taken between the check and the
   * spawn makes the process exit: then it tries another port.
   */
  async start(command: string, argsFor: (port: number) => string[], withBusPort = false): Promise<number> {
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      if (withBusPort && (port + 10000 > 65535 || (await portTaken(port + 10000)))) continue;
      const child = spawn(command, argsFor(port), { stdio: 'ignore' });
      this.children.set(port, child);
      try {
        await waitFor(
          async () => {
            if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${command} exited with ${child.exitCode ?? child.signalCode}`);
            return answers(port, this.tls);
          },
          { timeoutMs: 5000, what: `${command} on port ${port} to accept connections` },
        );
        return port;
      } catch (err) {
        await this.kill(port);
        if (attempt >= 2) throw err;
      }
    }
  }

  /** Writes a file into the directory (sentinel needs a config file it can rewrite), returning its path. */
  writeFile(name: string, text: string): string {
    const file = path.join(this.dir, name);
    writeFileSync(file, text);
    return file;
  }

  isRunning(port: number): boolean {
    return this.children.has(port);
  }

  /** SIGSTOP (`frozen`) or SIGCONT to the process on `port`: alive, and silent. */
  freeze(port: number, frozen: boolean): void {
    const child = this.children.get(port);
    if (child === undefined) throw new Error(`no redis process of this topology on port ${port}`);
    child.kill(frozen ? 'SIGSTOP' : 'SIGCONT');
  }

  /** SIGKILLs the process on `port` and waits for it to be gone. */
  async kill(port: number): Promise<void> {
    const child = this.children.get(port);
    if (child === undefined) throw new Error(`no redis process of this topology on port ${port}`);
    this.children.delete(port);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.children.keys()].map((port) => this.kill(port)));
    process.removeListener('exit', this.killAll);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * One command on a fresh connection, closed afterwards (RESP2, no retries, short timeouts):
 * for admin and polling, so it never reuses a connection to a node that has just gone.
 */
export async function adminCall(at: HostPort, auth: RedisAuth, command: string, ...args: (string | number)[]): Promise<unknown> {
  const redis = new Redis({
    host: at.host,
    port: at.port,
    username: auth.username,
    password: auth.password,
    ...(auth.tls === undefined ? {} : { tls: auth.tls }),
    protocol: 2,
    lazyConnect: true,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
    connectTimeout: 1000,
    commandTimeout: 2000,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await redis.call(command, ...args);
  } finally {
    redis.disconnect();
  }
}

/** The first word of ROLE: 'master', 'slave' or 'sentinel'. */
export async function roleOf(at: HostPort, auth: RedisAuth): Promise<string> {
  const role = (await adminCall(at, auth, 'ROLE')) as unknown[];
  return String(role[0]);
}
