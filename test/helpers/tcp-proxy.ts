import net from 'node:net';

/**
 * A TCP relay between the gateway and Redis that a test can break on purpose:
 * `cut()` drops every connection and refuses new ones (Redis down), `blackhole()` accepts but never
 * answers (Redis hung), `blackholeMatching(marker)` does that only to connections whose first bytes
 * contain `marker` (e.g. the gateway's change-notice connection, by its CLIENT SETNAME), `heal()`
 * restores normal service, on new connections; `unblock()` ends a `blackhole()` on the same
 * connections, as a Redis that stalled and recovered. Works the same on a shared Redis.
 */
export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  cut(): Promise<void>;
  blackhole(): void;
  unblock(): void;
  blackholeMatching(marker: string): void;
  cutBeforeAnswerTo(command: string): void;
  heal(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  let mode: 'pass' | 'blackhole' = 'pass';
  let marker: string | undefined;
  /** A command whose answer the next connection to send it never gets (cutBeforeAnswerTo). */
  let answerCut: string | undefined;
  /** What each client connection sent first, to recognise it later. */
  const firstBytes = new Map<net.Socket, string>();
  /** Each client connection's connection to the target. */
  const pairs = new Map<net.Socket, net.Socket>();
  /** Connections a blackhole() silenced, and connections it accepted without a target: what unblock() restores. */
  const silenced = new Set<net.Socket>();
  const held = new Set<net.Socket>();
  const silence = (client: net.Socket) => {
    client.unpipe();
    client.pause();
  };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('close', () => {
      sockets.delete(client);
      firstBytes.delete(client);
      held.delete(client);
      silenced.delete(client);
    });
    client.on('error', () => {});
    if (mode === 'blackhole') return void held.add(client); // read nothing, answer nothing
    relay(client);
  });
  /** Connects a client connection to the target, bytes passing both ways. */
  const relay = (client: net.Socket) => {
    // Commands may arrive in any chunking: look at the opening bytes as they accumulate.
    const inspect = (chunk: Buffer) => {
      const text = (firstBytes.get(client) ?? '') + chunk.toString('latin1');
      firstBytes.set(client, text);
      if (marker !== undefined && text.includes(marker)) silence(client);
      if (text.length > 4096 || (marker !== undefined && text.includes(marker))) client.off('data', inspect);
    };
    client.on('data', inspect);
    const upstream = net.connect(Number(target.port), target.hostname);
    // The command as RESP spells it, looked for across chunk boundaries in what the client sends.
    let tail = '';
    client.on('data', (chunk: Buffer) => {
      if (answerCut === undefined) return;
      const text = tail + chunk.toString('latin1');
      tail = text.slice(-64);
      if (!text.toUpperCase().includes(`\r\n${answerCut.toUpperCase()}\r\n`)) return; // a client may send it in lower case
      answerCut = undefined;
      // This chunk is on its way to Redis already (pipe's listener ran first); its answer cannot be
      // here before the next turn of the event loop.
      upstream.unpipe(client);
      upstream.once('data', () => {
        client.destroy();
        upstream.destroy();
      });
      upstream.resume();
    });
    sockets.add(upstream);
    pairs.set(client, upstream);
    client.on('close', () => pairs.delete(client));
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  };
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const destroyAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  const url = `redis://127.0.0.1:${port}${target.pathname}`;
  return {
    port,
    url,
    async cut() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        destroyAll();
      });
    },
    blackhole() {
      mode = 'blackhole';
      for (const socket of sockets) {
        socket.unpipe();
        socket.pause();
      }
      for (const client of pairs.keys()) silenced.add(client);
    },
    unblock() {
      mode = 'pass';
      for (const client of silenced) {
        const upstream = pairs.get(client)!;
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        upstream.resume();
      }
      silenced.clear();
      for (const client of held) {
        relay(client);
        client.resume();
      }
      held.clear();
    },
    cutBeforeAnswerTo(command) {
      answerCut = command;
    },
    blackholeMatching(text) {
      marker = text;
      for (const [client, first] of firstBytes) if (first.includes(text)) client.destroy(); // it reconnects, into the hole
    },
    async heal() {
      mode = 'pass';
      marker = undefined;
      destroyAll(); // clients reconnect through a clean relay
      if (!server.listening) await listen(port);
    },
    async close() {
      destroyAll();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
