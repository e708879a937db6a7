import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { withRequestHook } from '../../../src/node-internals/agent-request-hook.js';

/**
 * Canary for src/node-internals/agent-request-hook.ts: Node calls `agent.addRequest(req, options)`
 * from the ClientRequest constructor, before the request has a connection, reads
 * `req.maxHeadersCount` only when a connection is assigned, and queues a request that must wait in
 * `agent.requests[agent.getName(options)]` within that call. If Node changes any, these fail.
 */

/** A raw upstream that answers every request with `lines` header lines. */
async function upstreamWithHeaderLines(lines: number): Promise<{ port: number; close: () => Promise<void>; heads: string[] }> {
  const heads: string[] = [];
  const server = net.createServer((socket) => {
    let head = '';
    socket.on('data', (chunk) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      heads.push(head);
      let answer = 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n';
      for (let i = 1; i < lines; i++) answer += `h${i}:1\r\n`;
      socket.end(answer + '\r\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, heads, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

function get(port: number, agent: http.Agent, headers: Record<string, string> = {}, onSocket?: (req: http.ClientRequest) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.rawHeaders.length / 2));
    });
    req.on('error', reject);
    if (onSocket) req.on('socket', () => onSocket(req));
  });
}

describe('Agent#addRequest, hooked by a subclass', () => {
  it('is called from the request constructor, with the request, before it has a connection', () => {
    const seen: { socket: unknown; sync: boolean }[] = [];
    let constructing = false;
    const Hooked = withRequestHook(http.Agent);
    const agent = new (class extends Hooked {
      override requestCreated(req: http.ClientRequest): void {
        seen.push({ socket: req.socket, sync: constructing });
      }
    })({ keepAlive: false });
    constructing = true;
    const req = http.request({ host: '127.0.0.1', port: 9, agent });
    constructing = false;
    req.on('error', () => {});
    req.destroy();
    expect(seen).toEqual([{ socket: null, sync: true }]);
    agent.destroy();
  });

  it('is early enough for maxHeadersCount; the socket event is too late for it', async () => {
    const upstream = await upstreamWithHeaderLines(2001);
    const Hooked = withRequestHook(http.Agent);
    const hooked = new (class extends Hooked {
      override requestCreated(req: http.ClientRequest): void {
        req.maxHeadersCount = 2001;
      }
    })({ keepAlive: false });
    try {
      expect(await get(upstream.port, hooked)).toBe(2001);
      // Set when the request has its connection, the parser already kept Node's default.
      const plain = new http.Agent({ keepAlive: false });
      expect(await get(upstream.port, plain, {}, (req) => (req.maxHeadersCount = 2001))).toBeLessThan(2001);
      plain.destroy();
    } finally {
      hooked.destroy();
      await upstream.close();
    }
  });

  it('has placed the request when it returns: queued under the pool\'s name for it when every connection is busy, else not', async () => {
    const upstream = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const port = (upstream.address() as AddressInfo).port;
    const placed: { queued: boolean }[] = [];
    const Hooked = withRequestHook(http.Agent);
    const agent = new (class extends Hooked {
      override requestPlaced(req: http.ClientRequest, options: http.ClientRequestArgs): void {
        placed.push({ queued: this.requests[this.getName(options)]?.includes(req) === true });
      }
    })({ keepAlive: true, maxSockets: 1 });
    try {
      await Promise.all([get(port, agent), get(port, agent)]);
      expect(placed).toEqual([{ queued: false }, { queued: true }]);
    } finally {
      agent.destroy();
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});
