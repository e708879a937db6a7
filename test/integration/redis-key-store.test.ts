import { urlTarget } from '../../src/keys/redis-target.js';
import { KeyResolver, KeyStoreUnavailableError } from '../../src/keys/key-resolver.js';
import { RedisKeyStore } from '../../src/keys/redis-key-store.js';
import { RedisConnections } from '../../src/keys/redis-connections.js';
import { CorruptKeyRecordError } from '../../src/keys/key-store.js';
import { keyStoreContract, newRecord } from '../helpers/key-store-contract.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { waitFor } from '../helpers/wait.js';
import { randomBytes } from 'node:crypto';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => redis.stop());

keyStoreContract('RedisKeyStore', async () => {
  const prefix = `${redis.prefix}${randomBytes(4).toString('hex')}:`;
  // Connected before it is used: a gateway's store queues nothing (on a loaded machine the
  // observer's subscription could be confirmed first).
  const store = await readyStore(prefix);
  const observer = new RedisKeyStore({ target: urlTarget(redis.url), prefix, subscribe: true });
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
  const store = new RedisKeyStore({ target: urlTarget(redis.url), prefix });
  await waitFor(() => store.findById('key_probe').then(() => true, () => false), { what: 'Redis connection' });
  return store;
}

describe('RedisKeyStore specifics', () => {
  it('for key administration, connects once and never again: nothing queued is sent on a new connection', async () => {
    // A new connection could reach a Redis that refuses the database (restarted with fewer, a failover),
    // and ioredis sends what was queued and unanswered before anyone could notice: to database 0.
    const relay = await startTcpProxy(redis.url);
    const prefix = `${redis.prefix}once:`;
    const admin = new RedisKeyStore({ target: urlTarget(relay.url), prefix, waitForConnection: true, commandTimeoutMs: 2000 });
    try {
      await admin.connect();
      expect(await admin.list()).toEqual([]);
      await relay.cut();
      await relay.heal();
      await expect(admin.create(newRecord({ id: 'key_after_cut' }))).rejects.toThrow();
      expect(await redis.client.keys(`${prefix}*`)).toEqual([]);
    } finally {
      await admin.close();
      await relay.close();
    }
  });

  it('create leaves nothing behind when Redis refuses part of it after the checks (ids changed type just then)', async () => {
    const prefix = `${redis.prefix}race:`;
    const store = await readyStore(prefix);
    const { Redis } = await import('ioredis');
    const type = Redis.prototype.type;
    // Right after the store looks at ids, someone else makes it a string.
    Redis.prototype.type = async function (this: InstanceType<typeof Redis>, ...args: Parameters<typeof type>) {
      const answer = await type.apply(this, args);
      if (this !== redis.client) await redis.client.set(`${prefix}ids`, 'not a set');
      return answer;
    } as typeof type;
    try {
      await expect(store.create(newRecord())).rejects.toThrow(/^Redis refused part of the key's creation \(WRONGTYPE.*\): nothing was kept$/);
    } finally {
      Redis.prototype.type = type;
      await store.close();
    }
    expect(await redis.client.keys(`${prefix}*`)).toEqual([`${prefix}ids`]);
  });

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

  it('a change made by another administrator between its read and its write is kept: read again, then written (compare-and-set)', async () => {
    const prefix = `${redis.prefix}cas:`;
    const store = await readyStore(prefix);
    const record = newRecord();
    await store.create(record);
    const { Redis } = await import('ioredis');
    const evalScript = Redis.prototype.eval;
    let interleaved = false;
    // Right before the store's write, someone else changes the key's permissions.
    Redis.prototype.eval = async function (this: InstanceType<typeof Redis>, ...args: Parameters<typeof evalScript>) {
      if (!interleaved) {
        interleaved = true;
        const current = JSON.parse((await redis.client.get(`${prefix}key:${record.key_hash}`))!);
        await redis.client.set(`${prefix}key:${record.key_hash}`, JSON.stringify({ ...current, permissions: ['eod_list'] }));
      }
      return evalScript.apply(this, args);
    } as typeof evalScript;
    try {
      const disabled = await store.disable(record.id, new Date('2026-11-28T12:00:00Z'));
      expect(disabled).toMatchObject({ permissions: ['eod_list'], disabled_at: '2026-11-28T12:00:00.000Z' });
    } finally {
      Redis.prototype.eval = evalScript;
      await store.close();
    }
    expect(interleaved).toBe(true);
    expect(JSON.parse((await redis.client.get(`${prefix}key:${record.key_hash}`))!)).toMatchObject({ permissions: ['eod_list'], disabled_at: '2026-11-28T12:00:00.000Z' });
    // The write counted one change (the other administrator's went around the counter).
    expect(await redis.client.get(`${prefix}version`)).toBe('1');
  });

  it('treats a corrupt record as an error, never as a key', async () => {
    const prefix = `${redis.prefix}corrupt:`;
    const store = await readyStore(prefix);
    await redis.client.set(`${prefix}key:${'a'.repeat(64)}`, '{"id":"x"}');
    await redis.client.set(`${prefix}key:${'b'.repeat(64)}`, 'not json');
    await expect(store.findByHash('a'.repeat(64))).rejects.toThrow(/unexpected shape/);
    await expect(store.findByHash('b'.repeat(64))).rejects.toThrow(/not JSON/);
    // A value of another Redis type: the same kind of error (Redis answered), not an outage.
    await redis.client.hset(`${prefix}key:${'c'.repeat(64)}`, 'a', 'b');
    await expect(store.findByHash('c'.repeat(64))).rejects.toBeInstanceOf(CorruptKeyRecordError);
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

  it("hears the change notices of its own database only, though Redis's pub/sub ignores database numbers", async () => {
    const prefix = `${redis.prefix}dbs:`;
    const onDb = (db: number) => `${redis.url}/${db}`;
    const observer = new RedisKeyStore({ target: urlTarget(onDb(3)), prefix, subscribe: true });
    const [here, elsewhere] = [new RedisKeyStore({ target: urlTarget(onDb(3)), prefix, waitForConnection: true }), new RedisKeyStore({ target: urlTarget(onDb(4)), prefix, waitForConnection: true })];
    const [mine, theirs] = [newRecord(), newRecord()];
    const heard: string[] = [];
    try {
      let subscribed = false;
      observer.watch((event) => {
        if (event.type === 'resync') subscribed = true;
        else if (subscribed && event.type === 'changed') heard.push(event.keyHash);
      });
      await waitFor(() => subscribed, { what: 'the subscription' });
      await Promise.all([here.connect(), elsewhere.connect()]);
      await Promise.all([here.create(mine), elsewhere.create(theirs)]);
      // Published in this order, and delivered in it: the first would arrive first if it arrived at all.
      await elsewhere.disable(theirs.id, new Date());
      await here.disable(mine.id, new Date());
      await waitFor(() => heard.length > 0, { what: 'the notice of its own database' });
      expect(heard).toEqual([mine.key_hash]);
    } finally {
      await Promise.all([observer.close(), here.close(), elsewhere.close()]);
      // Taken away again: this may be a shared Redis.
      for (const [db, record] of [[3, mine], [4, theirs]] as const) {
        const client = redis.client.duplicate({ db });
        await client.del(`${prefix}key:${record.key_hash}`, `${prefix}id:${record.id}`, `${prefix}ids`);
        client.disconnect();
      }
    }
  });

  it('a gateway connection that ioredis ended without close() is opened again (ioredis gives up when a Sentinel failover closes a reconnection under way)', async () => {
    const health: { available: boolean; notices: boolean }[] = [];
    const connections = new RedisConnections({
      target: urlTarget(redis.url),
      channel: () => `${redis.prefix}reopen:events`,
      onEvent: (event) => {
        if (event.type === 'health') health.push(event);
      },
    });
    try {
      const up = () => health.at(-1)?.available === true && health.at(-1)?.notices === true;
      await waitFor(up, { what: 'both connections up' });
      // What ioredis does in that race: the commands connection ended for good.
      connections.client.disconnect();
      await waitFor(() => connections.client.status === 'end', { what: 'the connection ended' });
      expect(up()).toBe(false);
      await waitFor(up, { timeoutMs: 5_000, what: 'both connections up again' });
    } finally {
      await connections.close();
    }
  });

  it('counts itself down as soon as a health-check PING times out, not once the hung connection has closed', async () => {
    // A hung Redis (black-holed: sockets open and silent) is noticed only by the health check. The
    // connection the PING timed out on is then closed, which a hung peer may take seconds to finish:
    // the store is down from the timeout, not from the close.
    const relay = await startTcpProxy(redis.url);
    const health: boolean[] = [];
    let healthWhenTimedOut: boolean | undefined;
    const store = new RedisKeyStore({
      target: urlTarget(relay.url),
      prefix: `${redis.prefix}ping:`,
      subscribe: true,
      commandTimeoutMs: 200,
      healthCheckIntervalMs: 100,
      onError: (_err, context) => {
        // Looked at once what the store does on the timeout has run, before any later event.
        if (context === 'redis health check' && healthWhenTimedOut === undefined) setImmediate(() => (healthWhenTimedOut = health.at(-1)));
      },
    });
    try {
      store.watch((event) => {
        if (event.type === 'health') health.push(event.available && event.notices);
      });
      await waitFor(() => health.at(-1) === true, { what: 'the store to be up' });
      relay.blackhole();
      await waitFor(() => healthWhenTimedOut !== undefined, { what: 'a health-check PING to time out' });
      expect(healthWhenTimedOut).toBe(false);
    } finally {
      await store.close();
      await relay.close();
    }
  });

  it('with a resolver in front: a lookup that timed out in a stall, on connections that never dropped, is followed by the resolver\'s own until one succeeds', async () => {
    // Redis stalled (a slow fork, a long script), then back, on the same connections: commands time
    // out, but no connection drops and no health check runs here, so nothing but the resolver's own
    // lookups can see that Redis answers again. (Stalled through a relay, not CLIENT PAUSE: the Redis
    // may be a shared one.)
    const relay = await startTcpProxy(redis.url);
    const store = new RedisKeyStore({ target: urlTarget(relay.url), prefix: `${redis.prefix}stall:`, subscribe: true, commandTimeoutMs: 200, healthCheckIntervalMs: 3_600_000 });
    const resolver = new KeyResolver(store, { failureProbeIntervalMs: 100 });
    try {
      await waitFor(() => resolver.storeAvailable, { what: 'the store to be up' });
      relay.blackhole();
      await expect(resolver.resolve('1'.repeat(64))).rejects.toBeInstanceOf(KeyStoreUnavailableError);
      expect(resolver.storeAvailable).toBe(false);
      relay.unblock();
      // No lookup from here on but the resolver's.
      await waitFor(() => resolver.storeAvailable, { what: 'the resolver to see Redis answer again', timeoutMs: 3000 });
    } finally {
      resolver.close();
      await store.close();
      await relay.close();
    }
  });

  it('lists every key it can read and reports the others, a value of another type included', async () => {
    const prefix = `${redis.prefix}list-corrupt:`;
    const store = await readyStore(prefix);
    try {
      const [sound, notJson, wrongType, hiddenId] = [newRecord(), newRecord(), newRecord(), newRecord()];
      for (const record of [sound, notJson, wrongType, hiddenId]) await store.create(record);
      await redis.client.set(`${prefix}key:${notJson.key_hash}`, 'not json');
      await redis.client.del(`${prefix}key:${wrongType.key_hash}`);
      await redis.client.hset(`${prefix}key:${wrongType.key_hash}`, 'a', 'b');
      // A sound record whose id mapping is of another type: the key works, so it must not vanish from the list.
      await redis.client.del(`${prefix}id:${hiddenId.id}`);
      await redis.client.hset(`${prefix}id:${hiddenId.id}`, 'hash', hiddenId.key_hash);
      const reported: string[] = [];
      expect((await store.list(undefined, (what) => reported.push(what))).map((r) => r.id)).toEqual([sound.id]);
      expect(reported.sort()).toEqual([`id ${hiddenId.id}`, ...[notJson, wrongType].map((r) => `sha256 ${r.key_hash.slice(0, 12)}…`)].sort());
      // Show and disable say what is wrong instead of failing as if Redis were down.
      await expect(store.findById(hiddenId.id)).rejects.toBeInstanceOf(CorruptKeyRecordError);
      await expect(store.disable(hiddenId.id, new Date())).rejects.toBeInstanceOf(CorruptKeyRecordError);
      await expect(store.disable(wrongType.id, new Date())).rejects.toBeInstanceOf(CorruptKeyRecordError);
    } finally {
      await store.close();
    }
  });
});
