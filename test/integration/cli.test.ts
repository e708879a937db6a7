import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { runCli, startServe } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { request } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

let redis: TestRedis;
let env: Record<string, string>;

beforeAll(async () => {
  redis = await startTestRedis();
  env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix };
});
afterAll(async () => redis.stop());

const stored = async () => redis.client.keys(`${redis.prefix}*`);

describe('keys create', () => {
  it('prints the record with the secret once, and stores only its hash', async () => {
    const result = await runCli(['keys', 'create', '--acquirer', 'acq_9', '--permissions', 'eod_list,eod_read', '--allow-ip', '203.0.113.0/24,2001:db8::/32', '--description', 'nightly job'], env);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    const printed = JSON.parse(result.stdout);
    expect(printed).toEqual({
      id: expect.stringMatching(/^key_[0-9a-f]{20}$/),
      key: expect.stringMatching(/^acquirer_key_[A-Za-z0-9_-]{43}$/),
      acquirer_id: 'acq_9',
      permissions: ['eod_list', 'eod_read'],
      allowed_ips: ['203.0.113.0/24', '2001:db8::/32'],
      description: 'nightly job',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      disabled_at: null,
    });
    // The secret is nowhere in Redis, and no later command prints it.
    for (const name of await stored()) {
      const type = await redis.client.type(name);
      const value = type === 'set' ? (await redis.client.smembers(name)).join() : await redis.client.get(name);
      expect(`${name} ${value}`).not.toContain(printed.key);
    }
    const shown = await runCli(['keys', 'show', printed.id], env);
    const listed = await runCli(['keys', 'list', '--acquirer', 'acq_9'], env);
    for (const out of [shown.stdout, listed.stdout]) {
      expect(out).not.toContain(printed.key);
      expect(out).not.toContain('key_hash');
    }
    const { key: _secret, ...record } = printed;
    expect(JSON.parse(shown.stdout)).toEqual(record);
    expect(listed.stdout.trim().split('\n').map((l) => JSON.parse(l))).toEqual([record]);
  });

  it.each([
    [['--acquirer', 'acq_1', '--permissions', 'eod_list,eod_lst'], /--permissions: unknown permission "eod_lst" \(not in the policy's catalogue\)/],
    [['--acquirer', 'acq_1', '--permissions', 'acquirer_api_keys_create'], /unknown permission "acquirer_api_keys_create"/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', '10.0.0.1/8'], /--allow-ip: "10.0.0.1\/8": host bits are set; did you mean 10.0.0.0\/8\?/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', '010.0.0.1'], /--allow-ip: "010.0.0.1"/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', '0.0.0.0/0'], /"0\.0\.0\.0\/0": a \/0 covers every address; leave --allow-ip out to allow every address/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', '0.0.0.0/1,128.0.0.0/1'], /--allow-ip: together these allow every IPv4 address/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', '::/1,8000::/1,10.0.0.0/8'], /--allow-ip: together these allow every IPv6 address/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', ' , '], /--allow-ip: no address given/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--allow-ip', ''], /--allow-ip: no address given/],
    [['--acquirer', '', '--permissions', 'eod_list'], /--acquirer: required and must not be empty/],
    [['--acquirer', '   ', '--permissions', 'eod_list'], /--acquirer: required and must not be empty/],
    [['--permissions', 'eod_list'], /--acquirer: required/],
    [['--acquirer', 'acq 1', '--permissions', 'eod_list'], /--acquirer: 1 to 64 of lower-case a-z, 0-9, _ and -/],
    // One spelling per acquirer: none of these may stand beside acq_alpha.
    ...['ACQ_ALPHA', 'Acq_alpha', 'acq_alpha.', 'acq_alpha:acq_beta', '_acq', '-acq', 'a'.repeat(65), 'acq.alpha', 'acqé'].map(
      (acquirer) => [[`--acquirer=${acquirer}`, '--permissions', 'eod_list'], /--acquirer: 1 to 64 of lower-case a-z, 0-9, _ and -, starting with a letter or digit/] as [string[], RegExp],
    ),
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--description', 'x'.repeat(257)], /--description: at most 256 characters/],
    ...['line\nbreak', 'tab\there', 'bell\u0007', 'rtl \u202e override', 'isolate \u2066x\u2069', 'c1 \u009b'].map(
      (description) => [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--description', description], /--description: no control characters/] as [string[], RegExp],
    ),
    [['--acquirer', 'acq_1'], /--permissions: required/],
    [['--acquirer', 'acq_1', '--permissions', ''], /--permissions: give at least one/],
    [['--acquirer', 'acq_1', '--permissions', 'eod_list', '--colour', 'red'], /Unknown option '--colour'/],
  ])('refuses %j with exit code 2 and writes nothing', async (args, message) => {
    const before = await stored();
    const result = await runCli(['keys', 'create', ...args], env);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(await stored()).toEqual(before);
  });
});

describe('keys show, update, disable, list', () => {
  it('exit 1 for a key that does not exist', async () => {
    for (const args of [['show', 'key_nope'], ['disable', 'key_nope'], ['update', 'key_nope', '--permissions', 'eod_list']]) {
      const result = await runCli(['keys', ...args], env);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/no key with id key_nope/);
    }
  });

  it('refuses an API key pasted where its id belongs, without repeating it or acting on it', async () => {
    const { id, key } = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_paste', '--permissions', 'eod_list'], env)).stdout);
    const body = key.slice('acquirer_key_'.length);
    for (const args of [['show', key], ['disable', key], ['update', key, '--permissions', 'eod_list,eod_read'], ['show', `acquirer%5Fkey_${body}`]]) {
      const result = await runCli(['keys', ...args], env);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/expected a key id \(key_…\), and this argument is shaped like an API key: it was not looked up or printed/);
      expect(result.stderr).not.toContain(body.slice(0, 16));
    }
    expect(JSON.parse((await runCli(['keys', 'show', id], env)).stdout)).toMatchObject({ id, permissions: ['eod_list'], disabled_at: null });
  });

  it('a change whose answer from Redis was lost exits 1 saying it may be written, and running the command again announces it', async () => {
    const { id } = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_unconfirmed', '--permissions', 'eod_list'], env)).stdout);
    const relay = await startTcpProxy(redis.url);
    const listener = redis.client.duplicate();
    const heard: string[] = [];
    await listener.subscribe(`${redis.prefix}events`);
    listener.on('message', (_channel: string, message: string) => heard.push(message));
    try {
      for (const args of [['update', id, '--permissions', 'eod_list,eod_read'], ['disable', id]]) {
        relay.cutBeforeAnswerTo('EVAL'); // the compare-and-set that writes the change
        const result = await runCli(['keys', ...args], { ...env, REDIS_URL: relay.url });
        expect([result.code, result.stdout]).toEqual([1, '']);
        expect(result.stderr).toMatch(
          new RegExp(`^acquirer-gateway: key ${id}: Redis did not confirm the change \\(.*\\); it may be written, and if so running gateways were not told of it and apply it only when their cached copy expires \\(KEY_CACHE_TTL_MS\\): run the same command again\n$`),
        );
      }
      // Both were written, and neither announced.
      expect(JSON.parse((await runCli(['keys', 'show', id], env)).stdout)).toMatchObject({ permissions: ['eod_list', 'eod_read'], disabled_at: expect.any(String) });
      expect(heard).toEqual([]);
      expect((await runCli(['keys', 'disable', id], env)).code).toBe(0);
      await waitFor(() => heard.length > 0, { what: 'the change notice' });
      expect(JSON.parse(heard[0]!)).toMatchObject({ type: 'changed' });
    } finally {
      listener.disconnect();
      await relay.close();
    }
  });

  it('a write Redis refuses says so and that nothing was written, not that it may be', async () => {
    // A Redis user that may not SET: the transaction is refused as it is queued. Created and deleted
    // here, under a name of this file's own (this may be a shared Redis).
    const user = `${redis.prefix.replace(/:$/, '')}-noset`;
    await redis.client.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-set');
    try {
      const url = new URL(redis.url);
      url.username = user;
      url.password = 'pw';
      const result = await runCli(['keys', 'create', '--acquirer', 'acq_refused', '--permissions', 'eod_list'], { ...env, REDIS_URL: url.toString() });
      expect([result.code, result.stdout]).toEqual([1, '']);
      expect(result.stderr).toMatch(/^acquirer-gateway: cannot use Redis at redis:\/\/[^@\s]+: Redis refused the write, and nothing was written: NOPERM .*\n$/);
      expect(result.stderr).not.toContain('pw@');
    } finally {
      await redis.client.call('ACL', 'DELUSER', user);
    }
    expect(JSON.parse((await runCli(['keys', 'list', '--acquirer', 'acq_refused'], env)).stdout || '[]')).toEqual([]);
  });

  it("a creation whose answer from Redis was lost exits 1, prints no key, and says how to find and disable it", async () => {
    const relay = await startTcpProxy(redis.url);
    let id: string;
    try {
      relay.cutBeforeAnswerTo('EXEC');
      const result = await runCli(['keys', 'create', '--acquirer', 'acq_lost', '--permissions', 'eod_list'], { ...env, REDIS_URL: relay.url });
      expect([result.code, result.stdout]).toEqual([1, '']);
      const said = /^acquirer-gateway: key (key_[A-Za-z0-9_-]+): Redis did not confirm the key's creation \(Connection is closed\.\); it may exist, but its key was not printed and cannot be recovered: if `keys show (\1)` finds it, disable it \(`keys disable (\1)`\), and create another\n$/.exec(result.stderr);
      expect(said).not.toBeNull();
      id = said![1]!;
      expect(result.stderr).not.toContain('acquirer_key_');
    } finally {
      await relay.close();
    }
    expect(JSON.parse((await runCli(['keys', 'show', id], env)).stdout)).toMatchObject({ acquirer_id: 'acq_lost', disabled_at: null });
    expect((await runCli(['keys', 'disable', id], env)).code).toBe(0);
  });

  it('says on stderr when no running gateway received the notice, and exits 0 all the same', async () => {
    const { id } = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_unheard', '--permissions', 'eod_list'], env)).stdout);
    const unheard = await runCli(['keys', 'update', id, '--permissions', 'eod_list,eod_read'], env);
    expect(unheard.code).toBe(0);
    expect(JSON.parse(unheard.stdout).permissions).toEqual(['eod_list', 'eod_read']);
    expect(unheard.stderr).toMatch(/^acquirer-gateway: the change is written, and no running gateway received its notice: none is subscribed to this Redis and REDIS_KEY_PREFIX\./);
    // A subscriber, as a running gateway is: nothing to say.
    const listener = redis.client.duplicate();
    await listener.subscribe(`${redis.prefix}events`);
    try {
      const heard = await runCli(['keys', 'disable', id], env);
      expect([heard.code, heard.stderr]).toEqual([0, '']);
    } finally {
      listener.disconnect();
    }
  });

  it('a change written but not announced exits 1 and says so, and running the command again announces it', async () => {
    const { id } = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_quiet', '--permissions', 'eod_list'], env)).stdout);
    // A Redis user that may do everything but PUBLISH: the notice fails after the write. Created and
    // deleted here, under a name of this file's own (this may be a shared Redis).
    const user = `${redis.prefix.replace(/:$/, '')}-nopublish`;
    await redis.client.call('ACL', 'SETUSER', user, 'on', '>pw', '~*', '&*', '+@all', '-publish');
    try {
      const url = new URL(redis.url);
      url.username = user;
      url.password = 'pw';
      const result = await runCli(['keys', 'disable', id], { ...env, REDIS_URL: url.toString() });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(new RegExp(`^acquirer-gateway: key ${id}: the change is written in Redis, but running gateways could not be told of it \\(.*\\); they apply it only when their cached copy expires \\(KEY_CACHE_TTL_MS\\): run the same command again to announce it\n$`));
      expect(result.stderr).not.toContain('pw@');
    } finally {
      await redis.client.call('ACL', 'DELUSER', user);
    }
    expect(JSON.parse((await runCli(['keys', 'show', id], env)).stdout).disabled_at).not.toBeNull();
    const listener = redis.client.duplicate();
    const heard: string[] = [];
    await listener.subscribe(`${redis.prefix}events`);
    listener.on('message', (_channel: string, message: string) => heard.push(message));
    try {
      expect((await runCli(['keys', 'disable', id], env)).code).toBe(0);
      await waitFor(() => heard.length > 0, { what: 'the change notice' });
      expect(JSON.parse(heard[0]!)).toMatchObject({ type: 'changed' });
    } finally {
      listener.disconnect();
    }
  });

  it('create writes all of a key or reports what Redis refused, and prints no key it did not store whole', async () => {
    const brokenEnv = { ...env, REDIS_KEY_PREFIX: `${redis.prefix}brokenids:` };
    await redis.client.set(`${redis.prefix}brokenids:ids`, 'not a set');
    const result = await runCli(['keys', 'create', '--acquirer', 'acq_b', '--permissions', 'eod_list'], brokenEnv);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(new RegExp(`${redis.prefix}brokenids:ids is not a set \\(it is a string\\): nothing was written; repair or delete that value\n$`));
    // Nothing else under the prefix: no id mapping, no record (Redis would not have rolled them back).
    expect(await redis.client.keys(`${redis.prefix}brokenids:*`)).toEqual([`${redis.prefix}brokenids:ids`]);
  });

  it('refuses an option given twice', async () => {
    const twice = await runCli(['keys', 'create', '--acquirer', 'acq_twice', '--permissions', 'eod_list,eod_read', '--permissions', 'audit_logs_read'], env);
    expect([twice.code, twice.stdout]).toEqual([2, '']);
    expect(twice.stderr).toMatch(/^acquirer-gateway: --permissions: given more than once; give it once \(a list is comma-separated\)\n/);
    const ips = await runCli(['keys', 'create', '--acquirer', 'acq_twice', '--permissions', 'eod_list', '--allow-ip', '10.0.0.0/8', '--allow-ip', '192.168.0.0/16'], env);
    expect([ips.code, ips.stdout]).toEqual([2, '']);
    expect(JSON.parse((await runCli(['keys', 'list', '--acquirer', 'acq_twice'], env)).stdout || '[]')).toEqual([]);
    const serveTwice = await runCli(['serve', '--port', '1', '--port', '2'], env);
    expect([serveTwice.code, serveTwice.stderr]).toEqual([2, 'acquirer-gateway: --port: given more than once; give it once (a list is comma-separated)\n']);
  });

  const body = 'ykQPTLcPv4Qc0xgsurJdfADZUx2g6HDQxhmdS_cMPoQ'; // a key's random part, as generateKey makes them
  const key = `acquirer_key_${body}`;
  it.each([
    [[key]],
    [['keys', key]],
    [['keys', 'create', `--${key}`]],
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', `eod_list,${key}`]],
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', 'eod_list', '--allow-ip', key]],
    [['keys', 'create', '--acquirer', key, '--permissions', 'eod_list']],
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', 'eod_list', '--description', `the old one was ${key}`]],
    [['keys', 'show', body]], // the random part alone
    [['keys', 'disable', body]],
    [['keys', 'show', `key_${body}`]], // only acquirer_ cut off
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', `eod_list,${body}`]],
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', 'eod_list', '--allow-ip', body]],
    [['keys', 'create', '--acquirer', body, '--permissions', 'eod_list']],
    [['keys', 'create', '--acquirer', 'acq_x', '--permissions', 'eod_list', '--description', `the old one was ${body}`]],
    [['policy', 'check', key]],
    [['policy', 'check', body]],
    [['policy', 'check', `--${key}`]],
  ])('never repeats a key typed where it does not belong: %j', async (args) => {
    const result = await runCli(args, env);
    // A usage error (2); for policy check, a file that cannot be read (1). Nothing stored, nothing printed.
    expect([result.code, result.stdout]).toEqual([args[0] === 'policy' && !args[2]!.startsWith('--') ? 1 : 2, '']);
    expect(result.stderr).not.toContain(body.slice(0, 12));
  });

  it('says a long name of one case as it is: no key has one, and the name must be acted on', async () => {
    expect((await runCli(['keys', 'list', '--acquirer', key], env)).stderr).not.toContain(body.slice(0, 12));
    const longName = 'end_of_day_settlement_report_download_all_merchants';
    const unknown = await runCli(['keys', 'create', '--acquirer', 'acq_x', '--permissions', longName], env);
    expect([unknown.code, unknown.stderr]).toEqual([2, `acquirer-gateway: --permissions: unknown permission "${longName}" (not in the policy's catalogue)\n`]);
    const missing = await runCli(['policy', 'check', `/tmp/${longName}/policy.yaml`], env);
    expect(missing.stderr).toContain(`/tmp/${longName}/policy.yaml`);
  });

  it('update needs something to change; usage errors exit 2', async () => {
    expect((await runCli(['keys', 'update', 'key_x'], env)).code).toBe(2);
    expect((await runCli(['keys', 'update', 'key_x', '--allow-ip', ''], env)).stderr).toMatch(/no address given/);
    expect((await runCli(['keys', 'update', 'key_x', '--allow-ip', '10.0.0.0/8', '--allow-any-ip'], env)).code).toBe(2);
    expect((await runCli(['keys', 'list'], { ...env, REDIS_KEY_PREFIX: '' })).stderr).toMatch(/REDIS_KEY_PREFIX: must not be empty/);
    // Checked as serve checks it: named, exit 2, no stack, and the password never echoed.
    const badUrl = await runCli(['keys', 'list'], { ...env, REDIS_URL: 'redis://:hunter2@127.0.0.1:99999' });
    expect([badUrl.code, badUrl.stderr]).toEqual([2, 'acquirer-gateway: invalid configuration: REDIS_URL: must be a redis:// or rediss:// URL\n']);
    expect((await runCli(['keys', 'show'], env)).code).toBe(2);
    expect((await runCli(['keys', 'frobnicate'], env)).code).toBe(2);
  });

  // Eleven runs of the command: about 4 s on an idle machine, more beside other test files.
  it('list shows the readable keys and exits 1 naming the records it could not read', async () => {
    const listEnv = { ...env, REDIS_KEY_PREFIX: `${redis.prefix}list:` };
    const good = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_7', '--permissions', 'eod_list'], listEnv)).stdout);
    await redis.client.set(`${redis.prefix}list:id:key_broken`, 'f'.repeat(64));
    await redis.client.sadd(`${redis.prefix}list:ids`, 'key_broken');
    await redis.client.set(`${redis.prefix}list:key:${'f'.repeat(64)}`, 'not json');
    const result = await runCli(['keys', 'list'], listEnv);
    expect(result.code).toBe(1);
    expect(result.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual([good.id]);
    expect(result.stderr).toMatch(/1 key record\(s\) in Redis could not be read \(sha256 ffffffffffff/);
    // An id mapping of another type hides nothing, and show and disable say what to repair.
    await redis.client.hset(`${redis.prefix}list:id:key_hashed`, 'hash', good.key_hash ?? 'x');
    await redis.client.sadd(`${redis.prefix}list:ids`, 'key_hashed');
    expect((await runCli(['keys', 'list'], listEnv)).stderr).toMatch(/could not be read \(.*id key_hashed/);
    const show = await runCli(['keys', 'show', 'key_hashed'], listEnv);
    expect([show.code, show.stderr]).toEqual([1, `acquirer-gateway: cannot read the key in Redis: ${redis.prefix}list:id:key_hashed is not a string value; repair or delete that value\n`]);
    // A mapping that holds no key hash (the raw key, pasted there by hand): reported, and never repeated.
    const pasted = JSON.parse((await runCli(['keys', 'create', '--acquirer', 'acq_8', '--permissions', 'eod_list'], listEnv)).stdout);
    await redis.client.set(`${redis.prefix}list:id:${pasted.id}`, pasted.key);
    const listed = await runCli(['keys', 'list'], listEnv);
    expect(listed.stderr).toMatch(new RegExp(`could not be read \\(.*id ${pasted.id}`));
    for (const args of [['show', pasted.id], ['disable', pasted.id], ['update', pasted.id, '--permissions', 'eod_read']]) {
      const refused = await runCli(['keys', ...args], listEnv);
      expect([refused.code, refused.stderr]).toEqual([1, `acquirer-gateway: cannot read the key in Redis: ${redis.prefix}list:id:${pasted.id} does not hold a key hash; repair or delete that value\n`]);
    }
    expect(listed.stdout + listed.stderr).not.toContain(pasted.key);
    // A record of another type is named by its hash cut to 12 digits: the whole hash is the key's fingerprint.
    const hash = createHash('sha256').update(good.key).digest('hex');
    await redis.client.del(`${redis.prefix}list:key:${hash}`);
    await redis.client.hset(`${redis.prefix}list:key:${hash}`, 'a', 'b');
    const showGood = await runCli(['keys', 'show', good.id], listEnv);
    expect([showGood.code, showGood.stderr]).toEqual([1, `acquirer-gateway: cannot read the key in Redis: ${redis.prefix}list:key:${hash.slice(0, 12)}… is not a string value; repair or delete that value\n`]);
  }, 20_000);

  it('fails with exit 1, without a password, when Redis cannot be reached', async () => {
    const result = await runCli(['keys', 'list'], { REDIS_URL: 'redis://:hunter2@127.0.0.1:1' });
    expect(result.code).toBe(1);
    // With the reason the connection failed (refused here; a wrong password says WRONGPASS), not only that it closed.
    expect(result.stderr).toBe('acquirer-gateway: cannot use Redis at redis://127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1\n');
  });
});

describe('serve refuses to start on bad input', () => {
  // Never the default 127.0.0.1:6379, should a refusal ever come after the key store connects: a Redis this test did not start.
  const NO_REDIS = { REDIS_URL: 'redis://127.0.0.1:1' };
  it.each([
    [{}, /^acquirer-gateway: invalid configuration: UPSTREAM_URL: required/],
    [{ UPSTREAM_URL: 'http://127.0.0.1:1', PORT: '70000' }, /^acquirer-gateway: invalid configuration: PORT: must be an integer from 0 to 65535 \(got "70000"\)\n$/],
    [{ UPSTREAM_URL: 'http://127.0.0.1:1', TRUSTED_PROXIES: '10.0.0.0/33' }, /TRUSTED_PROXIES: "10.0.0.0\/33": prefix length must be at most 32/],
    [{ UPSTREAM_URL: 'nope' }, /UPSTREAM_URL: must be an absolute http:\/\/ or https:\/\/ URL/],
  ])('%j: exit 2, one line naming the variable', async (badEnv, message) => {
    const result = await runCli(['serve'], { ...NO_REDIS, ...badEnv });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a flag overrides the variable, and an unknown flag is refused', async () => {
    const bad = await runCli(['serve', '--port', '99999'], { ...NO_REDIS, UPSTREAM_URL: 'http://127.0.0.1:1', PORT: '8080' });
    expect(bad.stderr).toMatch(/PORT: must be an integer from 0 to 65535 \(got "99999"\)/);
    const unknown = await runCli(['serve', '--prot', '1'], { ...NO_REDIS, UPSTREAM_URL: 'http://127.0.0.1:1' });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--prot'/);
  });

  it.each([
    ['HOST', {}, 'HOST: cannot listen on 192.0.2.123 (EADDRNOTAVAIL)'],
    ['ADMIN_HOST', { WORKERS: '1' }, 'ADMIN_HOST: cannot listen on 192.0.2.123 (EADDRNOTAVAIL)'],
    ['ADMIN_HOST', { WORKERS: '2' }, 'ADMIN_HOST: cannot listen on 192.0.2.123 (EADDRNOTAVAIL)'],
  ])('an unusable bind address: one line naming %s (%j)', async (setting, extra, message) => {
    const result = await runCli(['serve'], { UPSTREAM_URL: 'http://127.0.0.1:1', PORT: '0', ADMIN_PORT: '0', REDIS_URL: 'redis://127.0.0.1:1', [setting]: '192.0.2.123', ...extra });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`acquirer-gateway: ${message}\n`);
  });

  it('a taken admin port: one line naming ADMIN_PORT', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()));
    try {
      const adminPort = String((taken.address() as net.AddressInfo).port);
      const result = await runCli(['serve'], { UPSTREAM_URL: 'http://127.0.0.1:1', PORT: '0', ADMIN_HOST: '127.0.0.1', ADMIN_PORT: adminPort, REDIS_URL: 'redis://127.0.0.1:1' });
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(/^acquirer-gateway: ADMIN_PORT: already in use \(.*\)\n$/);
    } finally {
      taken.close();
    }
  });

  it('an invalid policy: exit 1 with file:line:column: reason', async () => {
    const result = await runCli(['serve'], { ...NO_REDIS, UPSTREAM_URL: 'http://127.0.0.1:1', PORT: '0', POLICY_FILE: 'test/fixtures/policies/unknown-permission.yaml' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'acquirer-gateway: policy refused:\ntest/fixtures/policies/unknown-permission.yaml:9:32: routes.0.permissions.1: unknown permission "things_write" (not in the catalogue)\n',
    );
  });
});

describe('policy check, diff and routes', () => {
  it.each([[['policy', 'check', '--bogus']], [['policy', 'routes', '--format=json']], [['policy', 'diff', 'policies/acquirer-api.yaml', '-x']]])(
    '%j: an unknown option is a usage error (exit 2), not a file name',
    async (args) => {
      const result = await runCli(args);
      expect([result.code, result.stdout]).toEqual([2, '']);
      expect(result.stderr).toMatch(/^acquirer-gateway: Unknown option '-/);
    },
  );

  it.each(['-missing.yaml', '-h', '--help'])('a file whose name starts with a dash follows --: %s is checked, not taken for an option', async (name) => {
    const result = await runCli(['policy', 'check', '--', name]);
    expect([result.code, result.stdout, result.stderr]).toEqual([1, '', `${name}:0:0: cannot read policy: file not found\n`]);
  });

  it.each([[['policy', 'check']], [['policy', 'routes']], [['keys', 'create', '--acquirer', 'acq_1', '--permissions', 'eod_list']]])(
    '%j with an empty POLICY_FILE: a usage error naming the variable, as serve gives',
    async (args) => {
      const result = await runCli(args, { POLICY_FILE: '', REDIS_URL: 'redis://127.0.0.1:1' });
      expect([result.code, result.stdout]).toEqual([2, '']);
      expect(result.stderr).toBe('acquirer-gateway: invalid configuration: POLICY_FILE: must not be empty (got "")\n');
    },
  );

  it('check: a file whose name holds a key is named without it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'policy-name-'));
    try {
      const body = 'RbIL7GCn_NE2Al9PxbJ18r6w5rAagZSkraEvZDALRNw';
      const file = path.join(dir, `acquirer_key_${body}.yaml`);
      copyFileSync('policies/acquirer-api.yaml', file);
      const result = await runCli(['policy', 'check', file]);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/: ok \(41 routes/);
      expect(result.stdout).not.toContain(body);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('check: exit 0 with a summary for a valid policy', async () => {
    const result = await runCli(['policy', 'check', 'policies/acquirer-api.yaml']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^policies\/acquirer-api\.yaml: ok \(41 routes, 21 permissions, sha256 [0-9a-f]{64}\)\n$/);
  });

  it('check: exit 1 with one file:line:column: reason line per problem', async () => {
    const result = await runCli(['policy', 'check', 'test/fixtures/policies/ambiguous.yaml']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(4);
    for (const line of lines) expect(line).toMatch(/^test\/fixtures\/policies\/ambiguous\.yaml:\d+:\d+: routes\.\d\.path: GET /);
  });

  it('check: uses POLICY_FILE when no file is given', async () => {
    const result = await runCli(['policy', 'check'], { POLICY_FILE: 'test/fixtures/policies/unknown-field.yaml' });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe('test/fixtures/policies/unknown-field.yaml:10:5: routes.0.cache: unknown field "cache"\n');
  });

  it('diff: Markdown for a reviewer', async () => {
    const result = await runCli(['policy', 'diff', 'test/fixtures/policies/diff/old.yaml', 'test/fixtures/policies/diff/new.yaml']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('### Routes added (new access)');
    expect(result.stdout).toContain('- `GET /v1/acquirer/eod_statements`: **removed `eod_read`: loosens access**');
  });

  it('diff and routes: usage errors exit 2, invalid policies exit 1', async () => {
    expect((await runCli(['policy', 'diff', 'policies/acquirer-api.yaml'])).code).toBe(2);
    expect((await runCli(['policy', 'routes', 'test/fixtures/policies/bad-template.yaml'])).code).toBe(1);
    expect((await runCli(['policy', 'frobnicate'])).code).toBe(2);
  });

  it('routes: the effective route table', async () => {
    const result = await runCli(['policy', 'routes', 'policies/acquirer-api.yaml']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('| `eod_statement_download` | GET | `/v1/acquirer/eod_statements/:statement_id.csv` | statement_id: uuid | none | none | `eod_list`, `eod_read` | – | upstream |');
  });
});

describe('help', () => {
  // Every command and subcommand, with the line each usage begins with.
  const HELP: [string[], RegExp][] = [
    [['--help'], /^usage: acquirer-gateway <command> \[options\]\n/],
    [['help'], /^usage: acquirer-gateway <command> \[options\]\n/],
    [['keys', '--help'], /^usage: acquirer-gateway keys <subcommand> \[options\]\n  create /],
    [['keys', 'create', '-h'], /^usage: acquirer-gateway keys create --acquirer ID --permissions P1,P2\n[\s\S]*\n  --acquirer ID /],
    [['keys', 'update', '--help'], /^usage: acquirer-gateway keys update KEY_ID [\s\S]*\n  --allow-any-ip /],
    [['keys', 'disable', '--help'], /^usage: acquirer-gateway keys disable KEY_ID\nDisables a key for good/],
    [['keys', 'show', '--help'], /^usage: acquirer-gateway keys show KEY_ID\n/],
    [['keys', 'list', '--help'], /^usage: acquirer-gateway keys list \[--acquirer ID\]\n/],
    [['policy', 'help'], /^usage: acquirer-gateway policy <subcommand> \[FILE …\]\n  check /],
    [['policy', 'check', '--help'], /^usage: acquirer-gateway policy check \[FILE\]\nValidates a policy exactly as serve does/],
    [['policy', 'diff', '--help'], /^usage: acquirer-gateway policy diff OLD NEW\n/],
    [['policy', 'routes', '--help'], /^usage: acquirer-gateway policy routes \[FILE\]\n/],
    [['policy', 'impact', '--help'], /^usage: acquirer-gateway policy impact OLD NEW\n[\s\S]*Exit 0: no key loses\naccess; 3: one does/],
    [['policy', 'explain', '-h'], /^usage: acquirer-gateway policy explain METHOD TARGET --key-id ID\n[\s\S]*\n {2}--from ADDRESS /],
    [['serve', '--help'], /^usage: acquirer-gateway serve \[--flag value …\]\n[\s\S]*\n  --port {23}public listener port \(0: any free port\) \[8080\]\n[\s\S]*\n  --upstream-url {15}the legacy service, as an origin: http:\/\/host:port \[required\]\n/],
  ];

  it.each(HELP)('%j prints its usage on stdout and exits 0, touching nothing', async (args, usage) => {
    // No UPSTREAM_URL and a Redis nobody listens on: help needs neither.
    const result = await runCli(args, { REDIS_URL: 'redis://127.0.0.1:9' });
    expect([result.code, result.stderr]).toEqual([0, '']);
    expect(result.stdout).toMatch(usage);
    for (const line of result.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(100);
  });

  it('serve --help gives one line per setting, and points to docs/configuration.md for the rest', async () => {
    const { CONFIG_FIELDS } = await import('../../src/config/env.js');
    const lines = (await runCli(['serve', '--help'])).stdout.trim().split('\n');
    const settings = lines.filter((line) => line.startsWith('  --'));
    expect(settings.map((line) => line.split(/\s+/)[1])).toEqual(Object.values(CONFIG_FIELDS).map((f) => `--${f.env.toLowerCase().replaceAll('_', '-')}`));
    expect(lines.at(-1)).toBe('Every setting, what it does and why: docs/configuration.md.');
  });

  it('with no command, prints the usage on stderr and exits 2', async () => {
    const result = await runCli([]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^acquirer-gateway: a command is needed\nusage: acquirer-gateway <command>/);
  });

  it('--version prints the version of the package', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(await runCli(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('on an older Node.js', () => {
  /** A copy of the built command whose package.json asks for a Node.js this one is older than. */
  function installNeeding(version: string): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-node-version-'));
    cpSync('dist', path.join(dir, 'dist'), { recursive: true });
    cpSync('scripts', path.join(dir, 'scripts'), { recursive: true });
    symlinkSync(path.resolve('node_modules'), path.join(dir, 'node_modules'));
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string } };
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ ...pkg, engines: { node: `>=${version}` } }));
    return dir;
  }
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
  const needed = `${major + 1}.0.0`;
  const line = `acquirer-gateway: Node.js ${needed} or later is needed, and this is ${process.versions.node}: install it with \`npm install -g node@${major + 1}\` (or \`nvm install ${major + 1}\`), then run this again\n`;

  it.each([[['serve']], [['keys', 'list']], [['--help']]])('%j stops first, with one line naming the version found, the one needed and how to get it', (args) => {
    const dir = installNeeding(needed);
    try {
      const result = spawnSync(process.execPath, [path.join(dir, 'dist/cli.js'), ...args], { encoding: 'utf8', env: { PATH: process.env.PATH } });
      expect([result.status, result.stdout, result.stderr]).toEqual([1, '', line]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a later release of the same major is needed by its minor version, and got from that major', () => {
    const dir = installNeeding(`${major}.${minor + 1}.0`);
    try {
      const result = spawnSync(process.execPath, [path.join(dir, 'dist/cli.js'), 'serve'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
      expect([result.status, result.stdout, result.stderr]).toEqual([
        1,
        '',
        `acquirer-gateway: Node.js ${major}.${minor + 1}.0 or later is needed, and this is ${process.versions.node}: install it with \`npm install -g node@${major}\` (or \`nvm install ${major}\`), then run this again\n`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a release at or past the version needed runs', () => {
    const dir = installNeeding(`${major}.${minor}.0`);
    try {
      const result = spawnSync(process.execPath, [path.join(dir, 'dist/cli.js'), '--version'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
      expect([result.status, result.stderr]).toEqual([0, '']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops with that line even where the rest of the command would not load on that Node.js', () => {
    const dir = installNeeding(needed);
    try {
      // As on a Node.js whose node:util lacks an export the command uses: linking it would fail.
      const commandLine = path.join(dir, 'dist/cli/command-line.js');
      writeFileSync(commandLine, `import { exportOfAFutureNode } from 'node:util';\n${readFileSync(commandLine, 'utf8')}`);
      const result = spawnSync(process.execPath, [path.join(dir, 'dist/cli.js'), 'serve'], { encoding: 'utf8', env: { PATH: process.env.PATH } });
      expect([result.status, result.stdout, result.stderr]).toEqual([1, '', line]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('npm start and npm test run the same check before anything else', () => {
    const dir = installNeeding(needed);
    try {
      const result = spawnSync(process.execPath, [path.join(dir, 'scripts/require-node.mjs')], { encoding: 'utf8' });
      expect([result.status, result.stderr]).toEqual([1, line]);
      const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
      expect(scripts.prestart).toMatch(/^node scripts\/require-node\.mjs && /);
      expect(scripts.pretest).toBe('node scripts/require-node.mjs');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the installed command', () => {
  it('runs serve through its shebang, with the node flags the gateway is measured with', async () => {
    const g = await startServe({ ...env, UPSTREAM_URL: 'http://127.0.0.1:9' }, { viaShebang: true });
    try {
      // env -S execs node in the same process: its command line is node's own.
      const argv = readFileSync(`/proc/${g.child.pid}/cmdline`, 'utf8').split('\0');
      expect(argv.slice(1, 5)).toEqual(['--max-semi-space-size=4', '--expose-gc', '--heap-growing-percent=50', '--no-allocation-site-pretenuring']);
      const logged = g.logLines.map((line) => JSON.parse(line) as { event: string; streamed_gc_every_mib?: unknown });
      expect(logged.find((entry) => entry.event === 'listening')?.streamed_gc_every_mib).toBe(4);
      expect(logged.filter((entry) => entry.event === 'expose_gc_missing')).toEqual([]);
      expect((await request(g.adminUrl, '/healthz')).status).toBe(200);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  });

  it('started by node without the flags, serves and says what it cannot do', async () => {
    const g = await startServe({ ...env, UPSTREAM_URL: 'http://127.0.0.1:9' });
    try {
      const logged = g.logLines.map((line) => JSON.parse(line) as { level: number; event: string; streamed_gc_every_mib?: unknown });
      expect(logged.find((entry) => entry.event === 'listening')?.streamed_gc_every_mib).toBeNull();
      expect(logged.find((entry) => entry.event === 'expose_gc_missing')?.level).toBe(40);
      expect((await request(g.adminUrl, '/healthz')).status).toBe(200);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  });
});

describe('a fault outside any request', () => {
  it('an unhandled rejection is logged, redacted, and the gateway keeps serving', async () => {
    // Loaded before the gateway: a promise rejected with nobody to catch it, on a signal the test sends
    // once the gateway listens. Without the gateway's handler, node would end the process.
    const reject = "process.on('SIGUSR2', () => void Promise.reject(new Error('lost promise holding acquirer_key_AAAAAAAAAAAAAAAA')))";
    const g = await startServe({ ...env, UPSTREAM_URL: 'http://127.0.0.1:9', NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(reject)}` });
    try {
      g.child.kill('SIGUSR2');
      const logged = await waitFor(
        () => g.logLines.map((line) => JSON.parse(line) as { level: number; event: string; err?: { message: string } }).find((e) => e.event === 'unhandled_rejection'),
        { timeoutMs: 5_000, what: 'the unhandled rejection to be logged' },
      );
      expect(logged.level).toBe(50);
      expect(logged.err?.message).toBe('lost promise holding acquirer_key_[redacted]');
      expect(g.logLines.join('\n')).not.toContain('AAAAAAAAAAAAAAAA');
      expect(g.child.exitCode).toBeNull();
      expect((await request(g.url, '/v1/acquirer/eod_statements')).status).toBe(401);
    } finally {
      expect(await g.stop()).toBe(0);
    }
  });
});
