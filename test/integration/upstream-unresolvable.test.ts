import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from '../../src/app/create-app.js';
import { createUpstreamProxy } from '../../src/proxy/create-proxy.js';
import { generateKey, hashKey } from '../../src/keys/api-key.js';
import { KeyResolver } from '../../src/keys/key-resolver.js';
import { MemoryKeyStore } from '../../src/keys/memory-key-store.js';
import { silentLogger } from '../../src/observability/logger/logger.js';
import { createMetrics } from '../../src/observability/metrics/metrics.js';
import { bearer, request } from '../helpers/http.js';
import { newRecord } from '../helpers/key-store-contract.js';
import { shippedPolicy } from '../helpers/policy.js';
import { waitFor } from '../helpers/wait.js';

/**
 * An upstream whose name does not resolve. Name resolution is faked in the pool, so no query
 * leaves the machine; everything else is the real gateway over real sockets.
 */
it('an unresolvable upstream gives 502 with the documented body, counted as unresolvable', async () => {
  const lookups: string[] = [];
  const lookup = ((hostname: string, _options: unknown, callback: (err: NodeJS.ErrnoException) => void) => {
    lookups.push(hostname);
    callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
  }) as unknown as http.AgentOptions['lookup'];
  const store = new MemoryKeyStore();
  const key = generateKey();
  await store.create(newRecord({ key_hash: hashKey(key) }));
  const resolver = new KeyResolver(store);
  const metrics = createMetrics();
  const proxy = createUpstreamProxy({ target: 'http://statements.unresolvable.test:8080', timeoutMs: 5000, idleTimeoutMs: 5000, maxSockets: 256, logger: silentLogger, lookup });
  const policy = await shippedPolicy();
  const server = http.createServer(
    createApp({ policy: () => policy, resolver, trustedProxies: null, proxy, logger: silentLogger, metrics }),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  try {
    const res = await request(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, '/v1/acquirer/eod_statements', bearer(key));
    expect(res.status).toBe(502);
    expect(res.body.toString()).toBe('{"message":"Bad gateway"}');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(lookups).toEqual(['statements.unresolvable.test']);
    await waitFor(async () => (await metrics.registry.metrics()).includes('acquirer_gateway_upstream_errors_total{kind="unresolvable"} 1'), { what: 'the error metric' });
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    resolver.close();
    proxy.close();
  }
});
