import http from 'node:http';
import net from 'node:net';
import { isIdle, trackConnectionAnswers } from '../../../src/http/pipelining-and-drain.js';
import { IdleAwareServer } from '../../../src/node-internals/idle-connections.js';
import { waitFor } from '../../helpers/wait.js';

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

describe('the drain', () => {
  const BODY_BYTES = 32 * 1024 * 1024; // more than the kernel takes while the client reads nothing

  it('closes a connection whose answer has ended only once its last bytes are written', async () => {
    const server = new IdleAwareServer();
    const answers = trackConnectionAnswers(server, () => undefined);
    let answered: http.ServerResponse | undefined;
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (!answers.admit(req, res)) return;
      res.writeHead(200, { 'content-length': BODY_BYTES });
      res.end(Buffer.alloc(BODY_BYTES, 'a'));
      answered = res;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    client.pause();
    client.write('GET / HTTP/1.1\r\nHost: gateway\r\n\r\n');
    try {
      const res = await waitFor(() => answered, { what: 'the answer to be ended' });
      expect(res.socket!.writableLength).toBeGreaterThan(0);

      answers.drain();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      let received = 0;
      let start = Buffer.alloc(0);
      client.on('data', (chunk: Buffer) => {
        if (start.length < 1024) start = Buffer.concat([start, chunk]).subarray(0, 1024);
        received += chunk.length;
      });
      const ended = new Promise<void>((resolve) => client.once('close', () => resolve()));
      client.resume();
      await ended;
      await closed;

      expect(start.subarray(0, 17).toString()).toBe('HTTP/1.1 200 OK\r\n');
      const headBytes = start.indexOf('\r\n\r\n') + 4;
      expect(received - headBytes).toBe(BODY_BYTES); // the whole body, not a connection cut under it
    } finally {
      client.destroy();
      server.closeAllConnections();
    }
  });
});
