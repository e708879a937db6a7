import http from 'node:http';
import net from 'node:net';
import express from 'express';
import { bornWith, expressBorn } from '../../../src/node-internals/express-prototypes.js';

/**
 * Canary for src/node-internals/express-prototypes.ts: Node's IncomingMessage and ServerResponse
 * build an object they are called on as plain functions. If either becomes a class (which cannot be
 * called without `new`), or needs more arguments, these fail.
 */
describe('IncomingMessage and ServerResponse, called on an object', () => {
  it('build it as `new` would, with the prototype given', () => {
    const socket = new net.Socket();
    const proto = Object.create(http.IncomingMessage.prototype) as object;
    const Born = bornWith(http.IncomingMessage, proto);
    const req = new Born(socket);
    expect(Object.getPrototypeOf(req)).toBe(proto);
    expect(req).toBeInstanceOf(http.IncomingMessage);
    expect(req.socket).toBe(socket);
    expect(req.headers).toEqual({});
    socket.destroy();
  });

  it("serve requests that have Express's prototypes before Express sees them", async () => {
    const app = express();
    app.use((_req, res) => void res.send('ok'));
    const server = http.createServer({ ...expressBorn(app) }, app);
    const seen: boolean[] = [];
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      seen.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`);
      expect(await res.text()).toBe('ok');
      expect(seen).toEqual([true, true]);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
