import net from 'node:net';
import { isIdle } from '../../src/server.js';
import { waitFor } from '../helpers/wait.js';

/**
 * What the drain closes as idle. Node's own test took a connection whose answer had ended for idle,
 * though the answer's last bytes still waited in the socket, and destroying it lost them.
 */
describe('isIdle', () => {
  let server: net.Server;
  let client: net.Socket;
  let accepted: net.Socket;

  beforeEach(async () => {
    server = net.createServer();
    const connection = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    client.pause(); // a client that reads nothing for now
    accepted = await connection;
  });

  afterEach(async () => {
    client.destroy();
    accepted.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('is a connection with nothing owed and nothing left to write', () => {
    expect(isIdle(accepted)).toBe(true);
  });

  it('is not one that has read part of a request not yet taken (a head half-received)', async () => {
    client.write('GET /v1/acquirer/eod_sta');
    await waitFor(() => accepted.bytesRead > 0, { what: 'the bytes to arrive' });
    expect(isIdle(accepted)).toBe(false);
  });

  it('is one the gateway has ended, whatever the client sends after', async () => {
    client.write('GET / HTTP/1.1\r\n');
    await waitFor(() => accepted.bytesRead > 0, { what: 'the bytes to arrive' });
    accepted.end('HTTP/1.1 400 Bad Request\r\n\r\n');
    await waitFor(() => accepted.writableLength === 0, { what: 'the refusal to be written' });
    expect(isIdle(accepted)).toBe(true);
  });

  it('is not one whose bytes still wait to be written, though nothing more will be', () => {
    accepted.end(Buffer.alloc(32 * 1024 * 1024)); // more than the kernel takes while the client reads nothing
    expect(accepted.writableLength).toBeGreaterThan(0);
    expect(isIdle(accepted)).toBe(false);
  });
});
