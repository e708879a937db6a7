import net from 'node:net';
import { IdleAwareServer } from '../../../src/node-internals/idle-connections.js';

/**
 * Canary for src/node-internals/idle-connections.ts: `server.close()` closes idle connections by
 * calling `this.closeIdleConnections()`. If Node stops doing so, the drain's own idle check is never
 * asked, and this fails.
 */
const REQUEST = 'GET / HTTP/1.1\r\nHost: test\r\n\r\n';

/** A keep-alive connection that has had one answer and is now idle, and the server's side of it. */
async function idleConnection(server: IdleAwareServer): Promise<{ client: net.Socket; accepted: net.Socket }> {
  const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const accepted = await new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => {
    client.on('data', function answered(chunk: Buffer) {
      if (!chunk.toString().endsWith('ok')) return;
      client.off('data', answered);
      resolve();
    });
    client.write(REQUEST);
  });
  return { client, accepted };
}

/** Whether the server's side of the connection is still open after close(): it reads the next request, or it closes. */
function fate(accepted: net.Socket, client: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    accepted.once('data', () => resolve('open'));
    accepted.once('close', () => resolve('closed'));
    client.on('error', () => {});
    client.write(REQUEST);
  });
}

describe('http.Server#close', () => {
  it('asks the subclass which connections are idle, and only those close', async () => {
    const server = new IdleAwareServer((_req, res) => res.end('ok'));
    let asked = 0;
    server.closeIdle = () => asked++;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { client, accepted } = await idleConnection(server);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    expect(asked).toBe(1);
    expect(await fate(accepted, client)).toBe('open');
    client.destroy();
    await closed;
  });

  it("closes the same idle connection by Node's own check when the subclass has none", async () => {
    const server = new IdleAwareServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { client, accepted } = await idleConnection(server);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    expect(await fate(accepted, client)).toBe('closed');
    client.destroy();
    await closed;
  });
});
