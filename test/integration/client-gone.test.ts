import http from 'node:http';
import net from 'node:net';
import { createApp } from '../../src/app/create-app.js';
import { createUpstreamProxy, type UpstreamProxy } from '../../src/proxy/create-proxy.js';
import { generateKey, hashKey, type ApiKeyRecord } from '../../src/keys/api-key.js';
import { KeyResolver } from '../../src/keys/key-resolver.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { silentLogger } from '../../src/observability/logger/logger.js';
import { createMetrics } from '../../src/observability/metrics/metrics.js';
import { bearer, request } from '../helpers/http.js';
import { newRecord } from '../helpers/key-store-contract.js';
import { shippedPolicy } from '../helpers/policy.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

/** A store whose lookups wait until the test opens the gate. */
class GatedStore extends MemoryKeyStore {
  lookups = 0;
  gate: Promise<void> = Promise.resolve();

  override async findByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    this.lookups++;
    await this.gate;
    return super.findByHash(keyHash);
  }
}

const LIST = '/v1/acquirer/eod_statements';
let upstream: RecordingUpstream;
let server: http.Server;
let port: number;
let store: GatedStore;
let resolver: KeyResolver;
let proxy: UpstreamProxy;

beforeAll(async () => {
  upstream = await startUpstream();
  store = new GatedStore();
  resolver = new KeyResolver(store);
  proxy = createUpstreamProxy({ target: upstream.url, timeoutMs: 5000, idleTimeoutMs: 5000, maxSockets: 256, logger: silentLogger });
  const policy = await shippedPolicy();
  const app = createApp({
    policy: () => policy,
    resolver,
    trustedProxies: null,
    proxy,
    logger: silentLogger,
    metrics: createMetrics(),
  });
  server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  port = (server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  resolver.close();
  proxy.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await upstream.close();
});

it('a client that leaves while its key is being looked up is not proxied on its behalf', async () => {
  const key = generateKey();
  await store.create(newRecord({ key_hash: hashKey(key) }));
  let open!: () => void;
  store.gate = new Promise((resolve) => (open = resolve));

  const socket = net.connect(port, '127.0.0.1');
  socket.write(`GET ${LIST}?page=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`);
  await waitFor(() => store.lookups === 1, { what: 'the key lookup to start' });
  socket.destroy();
  await waitFor(
    () => new Promise<boolean>((resolve) => server.getConnections((_err, count) => resolve(count === 0))),
    { what: 'the gateway to see the client leave' },
  );
  open();

  // Its continuation runs as soon as the lookup settles, well before this request is even parsed.
  const after = await request(`http://127.0.0.1:${port}`, `${LIST}?page=2`, bearer(key));
  expect(after.status).toBe(200);
  expect(upstream.received.map((r) => r.url)).toEqual([`${LIST}?page=2`]);
  expect(upstream.connections()).toBe(1); // none was even opened for the client that left
});
