import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { waitFor } from './wait.js';

/** A Redis for one test file: a throwaway redis-server when the binary exists, else REDIS_URL. */
export interface TestRedis {
  readonly url: string;
  /** Unique per test file, so files never see each other's keys even on a shared Redis. */
  readonly prefix: string;
  /** A client for assertions (commandstats, raw values). */
  readonly client: Redis;
  /** Whether this file started the server (and so may change its settings and users). */
  readonly owned: boolean;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** One PING over a plain socket: the first line of the reply, or '' when nothing answers. */
function ping(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.on('data', (d: Buffer) => {
      reply += d.toString();
      if (reply.includes('\r\n')) socket.end();
    });
    socket.on('error', () => resolve(''));
    socket.on('close', () => resolve(reply.split('\r\n')[0] ?? ''));
    socket.write('PING\r\n');
  });
}

function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function spawnRedis(): Promise<{ url: string; process: ChildProcess }> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], {
      stdio: 'ignore',
    });
    const url = `redis://127.0.0.1:${port}`;
    try {
      await waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
          return (await ping(port)) === '+PONG';
        },
        { timeoutMs: 5000, what: 'redis-server to accept connections' },
      );
      return { url, process: child };
    } catch (err) {
      child.kill('SIGKILL');
      if (attempt >= 2) throw err; // a port taken between freePort() and spawn: try another
    }
  }
}

export async function startTestRedis(): Promise<TestRedis> {
  const prefix = `agw-test-${randomBytes(6).toString('hex')}:`;
  let url: string;
  let owned: ChildProcess | undefined;
  if (hasRedisServer()) {
    ({ url, process: owned } = await spawnRedis());
  } else if (process.env.REDIS_URL) {
    url = process.env.REDIS_URL;
  } else {
    throw new Error(
      'integration tests need Redis: put redis-server on PATH (Debian: apt-get install redis-server) or set REDIS_URL',
    );
  }
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  return {
    url,
    prefix,
    client,
    owned: owned !== undefined,
    async stop() {
      if (owned === undefined) {
        // Shared Redis: remove only what this file created, never flush.
        const keys = await client.keys(`${prefix}*`);
        if (keys.length > 0) await client.del(...keys);
      }
      client.disconnect();
      if (owned !== undefined && owned.exitCode === null) {
        const exited = new Promise((resolve) => owned.once('exit', resolve));
        owned.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/** Waits until `count` clients are subscribed to the change notices under `redis.prefix`: before a change is published, or a test proves nothing. */
export async function waitForSubscribers(redis: TestRedis, count: number): Promise<void> {
  await waitFor(async () => (await redis.client.pubsub('NUMSUB', `${redis.prefix}events`))[1] === count, { what: `${count} subscriber(s) to the change notices` });
}
