import net from 'node:net';
import { hashKey } from '../../src/keys/api-key.js';
import { createKey, startServe, type ServeProcess } from '../helpers/cli.js';
import { bearer, request } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';
import { stopAll } from '../helpers/stop-all.js';

/** A Redis stand-in that answers every command with bytes that are not RESP. */
let fake: net.Server;
let fakePort: number;
let redis: TestRedis;
let upstream: RecordingUpstream;
let gateway: ServeProcess;

beforeAll(async () => {
  redis = await startTestRedis();
  upstream = await startUpstream();
  fake = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', () => socket.write('this is not the Redis protocol\r\n'));
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', () => resolve()));
  fakePort = (fake.address() as net.AddressInfo).port;
  gateway = await startServe({ REDIS_URL: `redis://127.0.0.1:${fakePort}`, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url, REDIS_COMMAND_TIMEOUT_MS: '300' });
}, 30_000);

afterAll(() =>
  stopAll(
    () => gateway?.stop(),
    () => fake !== undefined && new Promise((resolve) => fake.close(resolve)),
    () => upstream?.close(),
    () => redis?.stop(),
  ),
);

it('Redis answering garbage: 503 within the bound, never an allow, and the gateway stays up', async () => {
  // A real key (in the real Redis): the gateway cannot see it through the garbage, so it must refuse.
  const { key } = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
  for (let i = 0; i < 5; i++) {
    const res = await request(gateway.url, '/v1/acquirer/eod_statements', bearer(key));
    expect(res.status).toBe(503);
    expect(res.body.toString()).toBe('{"message":"Service unavailable"}');
  }
  expect(upstream.received).toEqual([]);
  await waitFor(async () => (await request(gateway.adminUrl, '/readyz')).status === 503, { what: 'not ready' });
  expect((await request(gateway.adminUrl, '/healthz')).status).toBe(200);
});

it('one key whose record is not a record: that key gets 503, and the gateway stays ready', async () => {
  const real = await startServe({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: upstream.url });
  try {
    const { key } = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_1', permissions: ['eod_list', 'eod_read'] });
    const { key: sound } = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_2', permissions: ['eod_list', 'eod_read'] });
    const { key: wrongType } = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_3', permissions: ['eod_list', 'eod_read'] });
    // An id edited by hand into something no header may carry (it is sent upstream when requests are signed).
    const { key: oddId } = await createKey({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }, { acquirer: 'acq_4', permissions: ['eod_list', 'eod_read'] });
    const oddRecord = JSON.parse((await redis.client.get(`${redis.prefix}key:${hashKey(oddId)}`))!);
    await redis.client.set(`${redis.prefix}key:${hashKey(oddId)}`, JSON.stringify({ ...oddRecord, id: 'key_a\r\nx-acquirer-id: acq_2' }));
    await redis.client.set(`${redis.prefix}key:${hashKey(key)}`, 'not json');
    await redis.client.del(`${redis.prefix}key:${hashKey(wrongType)}`);
    await redis.client.hset(`${redis.prefix}key:${hashKey(wrongType)}`, 'a', 'b');
    for (const bad of [key, wrongType, oddId]) {
      const res = await request(real.url, '/v1/acquirer/eod_statements', bearer(bad));
      expect(res.status).toBe(503);
      expect(res.body.toString()).toBe('{"message":"Service unavailable"}');
    }
    expect(upstream.received).toEqual([]);
    const ready = await request(real.adminUrl, '/readyz');
    expect([ready.status, JSON.parse(ready.body.toString()).checks.key_store]).toEqual([200, 'ok']);
    expect((await request(real.adminUrl, '/metrics')).body.toString()).toMatch(/^acquirer_gateway_key_store_up 1$/m);
    expect((await request(real.url, '/v1/acquirer/eod_statements', bearer(sound))).status).toBe(200);
    // The log names each bad record by its hash cut to 12 digits: the whole hash is the key's fingerprint.
    // (Lines reach stdout within 200 ms of being written.)
    for (const bad of [key, wrongType]) {
      await waitFor(() => real.logLines.some((l) => l.includes(`${redis.prefix}key:${hashKey(bad).slice(0, 12)}…`)), { what: "the bad record's log line" });
      expect(real.logLines.join('\n')).not.toContain(hashKey(bad));
    }
  } finally {
    await real.stop();
  }

});
