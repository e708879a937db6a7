import net from 'node:net';
import { IdleAwareServer } from '../../../src/node-internals/idle-connections.js';

/**
 * Canary for src/node-internals/idle-connections.ts: `server.close()` closes idle connections by
 * calling `this.closeIdleConnections()`. If Node stops doing so, the drain's own idle check is never
 * asked, and this fails.
 */
describe('http.Server#close', () => {
  it('asks the subclass which connections are idle, and only those close', async () => {
    const server = new IdleAwareServer();
    let asked = 0;
    server.closeIdle = () => asked++;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise((resolve) => server.once('connection', resolve));
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    expect(asked).toBe(1);
    // Node's own check would have closed this idle connection; the subclass's kept it.
    expect(client.destroyed).toBe(false);
    client.destroy();
    await closed;
  });
});
