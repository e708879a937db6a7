import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createAdminServer, type AdminLimits } from '../../../src/admin/admin-server.js';
import { waitFor } from '../../helpers/wait.js';

const TOKEN = 'scrape-token-0123456789';
const READY = { policy: 'ok', key_store: 'ok', shutdown: 'no' } as const;

async function start(token?: string, limits?: AdminLimits): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createAdminServer({ metrics: { contentType: 'text/plain', text: async () => 'up 1\n' }, readiness: () => READY, token, ...(limits ? { limits } : {}) });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

function get(port: number, path: string, headers: http.OutgoingHttpHeaders = {}): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, body, headers: res.headers }));
      })
      .on('error', reject);
  });
}

describe('ADMIN_TOKEN', () => {
  it('guards /metrics and /readyz, and leaves /healthz open for the container', async () => {
    const admin = await start(TOKEN);
    try {
      const refused = { status: 401, body: '{"message":"Invalid authentication information"}' };
      for (const path of ['/metrics', '/readyz']) {
        for (const authorization of [undefined, 'Bearer wrong-token-0123456789', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN} ${TOKEN}`]) {
          const res = await get(admin.port, path, authorization === undefined ? {} : { authorization });
          expect({ status: res.status, body: res.body }).toEqual(refused);
          expect(res.headers['www-authenticate']).toBe('Bearer');
        }
      }
      expect(await get(admin.port, '/metrics', { authorization: `Bearer ${TOKEN}` })).toMatchObject({ status: 200, body: 'up 1\n' });
      expect(await get(admin.port, '/readyz', { authorization: `bearer ${TOKEN}` })).toMatchObject({ status: 200 });
      expect(await get(admin.port, '/healthz')).toMatchObject({ status: 200, body: '{"status":"ok"}' });
    } finally {
      await admin.close();
    }
  });

  it('is not asked for when none is set', async () => {
    const admin = await start();
    try {
      expect(await get(admin.port, '/metrics')).toMatchObject({ status: 200, body: 'up 1\n' });
    } finally {
      await admin.close();
    }
  });
});

describe("the admin listener's own limits", () => {
  const limits: AdminLimits = { maxConnections: 4, headersTimeoutMs: 1_000, requestTimeoutMs: 1_000, keepAliveTimeoutMs: 1_000 };

  it('closes a connection past its cap as it is accepted, and a half-sent head at its timeout', async () => {
    const admin = await start(undefined, limits);
    const sockets: net.Socket[] = [];
    try {
      const closed: boolean[] = [];
      for (let i = 0; i < limits.maxConnections + 1; i++) {
        const socket = net.connect(admin.port, '127.0.0.1');
        socket.on('error', () => {});
        socket.resume(); // read what the server writes, so that its close is seen
        const index = sockets.push(socket) - 1;
        closed[index] = false;
        socket.on('close', () => (closed[index] = true));
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n'); // never finished
      }
      // The one past the cap goes at once; the others when their head's time is up.
      await waitFor(() => closed[limits.maxConnections] || undefined, { timeoutMs: 1_000, what: 'the connection past the cap to be closed' });
      expect(closed.slice(0, limits.maxConnections)).toEqual([false, false, false, false]);
      await waitFor(() => closed.every(Boolean) || undefined, { timeoutMs: 5_000, what: 'half-sent heads to be closed' });
      expect(await get(admin.port, '/healthz')).toMatchObject({ status: 200 });
    } finally {
      for (const socket of sockets) socket.destroy();
      await admin.close();
    }
  }, 10_000);
});
