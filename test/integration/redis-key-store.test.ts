import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { keyStoreContract, newRecord } from '../helpers/key-store-contract.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { randomBytes } from 'node:crypto';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => redis.stop());

keyStoreContract('RedisKeyStore', async () => {
  const prefix = `${redis.prefix}${randomBytes(4).toString('hex')}:`;
  const store = new RedisKeyStore({ url: redis.url, prefix });
  const observer = new RedisKeyStore({ url: redis.url, prefix, subscribe: true });
  // The observer must be subscribed before anything is published.
  await waitFor(async () => (await redis.client.pubsub('NUMSUB', `${prefix}events`))[1] === 1, { what: 'subscription' });
  return {
    store,
    observer,
    async close() {
      await Promise.all([store.close(), observer.close()]);
    },
  };
});

/** The gateway's store fails fast instead of queueing, so wait until it has connected. */
async function readyStore(prefix: string): Promise<RedisKeyStore> {
  const store = new RedisKeyStore({ url: redis.url, prefix });
  await waitFor(() => store.findById('key_probe').then(() => true, () => false), { what: 'Redis connection' });
  return store;
}

describe('RedisKeyStore specifics', () => {
  it('stores the hash and the record, never the raw key', async () => {
    const prefix = `${redis.prefix}raw:`;
    const store = await readyStore(prefix);
    const record = newRecord();
    await store.create(record);
    const keys = (await redis.client.keys(`${prefix}*`)).sort();
    expect(keys).toEqual([`${prefix}id:${record.id}`, `${prefix}ids`, `${prefix}key:${record.key_hash}`].sort());
    expect(JSON.parse((await redis.client.get(`${prefix}key:${record.key_hash}`))!)).toEqual(record);
    await store.close();
  });

  it('treats a corrupt record as an error, never as a key', async () => {
    const prefix = `${redis.prefix}corrupt:`;
    const store = await readyStore(prefix);
    await redis.client.set(`${prefix}key:${'a'.repeat(64)}`, '{"id":"x"}');
    await redis.client.set(`${prefix}key:${'b'.repeat(64)}`, 'not json');
    await expect(store.findByHash('a'.repeat(64))).rejects.toThrow(/unexpected shape/);
    await expect(store.findByHash('b'.repeat(64))).rejects.toThrow(/not JSON/);
    // Fields the request path trusts: an acquirer id that is no safe header value, a whitelist entry
    // that does not parse (which must never degrade to "any address").
    const valid = newRecord();
    for (const [i, bad] of [{ acquirer_id: 'acq\r\nx' }, { acquirer_id: 'acq x' }, { allowed_ips: ['garbage'] }, { allowed_ips: ['10.0.0.1/8'] }].entries()) {
      const hash = String(i).repeat(64);
      await redis.client.set(`${prefix}key:${hash}`, JSON.stringify({ ...valid, key_hash: hash, ...bad }));
      await expect(store.findByHash(hash)).rejects.toThrow(/unexpected shape/);
    }
    await store.close();
  });
});
