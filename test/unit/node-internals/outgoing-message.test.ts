import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { bodyFramedByConnection, closeAfterAnswer } from '../../../src/node-internals/outgoing-message.js';

/**
 * Canary for src/node-internals/outgoing-message.ts: `res.chunkedEncoding` after the head, and
 * `res.shouldKeepAlive = false` before it. If Node changes what either means, these fail.
 */

/**
 * A server whose handler is `handle`, asked over a raw socket with `request`; once the answer is in,
 * the same request is sent again. Resolves to the first answer and whether the server closed the
 * connection (rather than answer the second).
 */
async function exchange(handle: http.RequestListener, request: string): Promise<{ raw: string; closedByServer: boolean }> {
  const server = http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    return await new Promise((resolve) => {
      const socket = net.connect((server.address() as AddressInfo).port, '127.0.0.1', () => socket.write(request));
      let raw = '';
      let first: string | undefined;
      socket.on('data', (chunk) => {
        raw += chunk.toString('latin1');
        if (first === undefined && /\r\n\r\nok$|\r\n0\r\n\r\n$/.test(raw)) {
          first = raw;
          socket.write(request);
        } else if (first !== undefined && raw.length > first.length && raw.slice(first.length).startsWith('HTTP/')) {
          socket.destroy();
          resolve({ raw: first, closedByServer: false });
        }
      });
      socket.on('end', () => resolve({ raw: first ?? raw, closedByServer: true }));
    });
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

describe('ServerResponse#chunkedEncoding after writeHead', () => {
  const stream = (framed: (framedByConnection: boolean) => void): http.RequestListener => (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    framed(bodyFramedByConnection(res, undefined));
    res.end('ok');
  };

  it('is true for a body without Content-Length to an HTTP/1.1 client (chunks frame it)', async () => {
    let framedByConnection: boolean | undefined;
    const { raw } = await exchange(stream((f) => (framedByConnection = f)), 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(raw.toLowerCase()).toContain('transfer-encoding: chunked');
    expect(framedByConnection).toBe(false);
  });

  it('is false for the same body to an HTTP/1.0 client (the close frames it)', async () => {
    let framedByConnection: boolean | undefined;
    const { raw, closedByServer } = await exchange(stream((f) => (framedByConnection = f)), 'GET / HTTP/1.0\r\n\r\n');
    expect(raw.toLowerCase()).not.toContain('transfer-encoding');
    expect(raw.toLowerCase()).not.toContain('content-length');
    expect(closedByServer).toBe(true);
    expect(framedByConnection).toBe(true);
  });
});

describe('ServerResponse#shouldKeepAlive = false before the head', () => {
  it('answers Connection: close and closes the connection, whatever headers are set after it', async () => {
    const { raw, closedByServer } = await exchange((_req, res) => {
      closeAfterAnswer(res);
      res.setHeader('x-set-after', '1');
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      res.writeHead(200, { 'content-length': '2' });
      res.end('ok');
    }, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(raw.toLowerCase()).toContain('connection: close');
    expect(closedByServer).toBe(true);
  });

  it('is what keeps a connection open otherwise', async () => {
    const { raw, closedByServer } = await exchange((_req, res) => {
      res.writeHead(200, { 'content-length': '2' });
      res.end('ok');
    }, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(raw.toLowerCase()).toContain('connection: keep-alive');
    expect(closedByServer).toBe(false);
  });
});
