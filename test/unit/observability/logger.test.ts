import fc from 'fast-check';
import { Writable } from 'node:stream';
import { createLogger } from '../../../src/observability/logger/logger.js';
import { clientRequestId, loggedPath, writeAccessLine } from '../../../src/observability/access-line.js';

const KEY = `acquirer_key_${'S'.repeat(43)}`;

function capture(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { lines, stream };
}

describe('the logger never writes a key', () => {
  it('redacts Authorization by path, keys in messages, and keys in error messages and stacks', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    logger.info({ req: { headers: { authorization: `Bearer ${KEY}` } } }, 'incoming');
    logger.info(`a message that quotes ${KEY}`);
    logger.error({ err: new Error(`lookup failed for ${KEY}`) }, 'failure');
    logger.warn({ path: `/v1/x?api_key=${KEY}`, authorization: KEY }, 'odd');
    expect(lines).toHaveLength(4);
    for (const line of lines) expect(line).not.toContain('S'.repeat(20));
    expect(JSON.parse(lines[0]!).req.headers.authorization).toBe('[redacted]');
    expect(JSON.parse(lines[1]!).msg).toBe('a message that quotes acquirer_key_[redacted]');
    const err = JSON.parse(lines[2]!).err;
    expect(err.message).toBe('lookup failed for acquirer_key_[redacted]');
    expect(err.stack).toMatch(/^Error: lookup failed for acquirer_key_\[redacted\]/);
  });
});

describe('what the scrubbing keeps and replaces', () => {
  it('censors secret fields at any depth and in any case, and leaves a clean record as it was', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    // \u212A is the Kelvin sign, which lower-cases to "k".
    logger.info({ upstream: { headers: { Authorization: 'Basic dXNlcjpzZWNyZXQ=' } }, key: 'opaque-secret', list: [{ key: 'x' }], '\u212AEY': 'kelvin-secret' }, 'secrets');
    const clean = { request_id: 'r1', path: '/v1/acquirer/eod_statements', status: 200, nested: { ok: [1, 'two'] }, none: null };
    logger.info(clean, 'request');
    expect(lines[0]).not.toContain('dXNlcjpzZWNyZXQ=');
    expect(lines[0]).not.toContain('opaque-secret');
    const first = JSON.parse(lines[0]!);
    expect(first.upstream.headers.Authorization).toBe('[redacted]');
    expect(first.key).toBe('[redacted]');
    expect(first.list).toEqual([{ key: '[redacted]' }]);
    expect(first['\u212AEY']).toBe('[redacted]');
    expect(JSON.parse(lines[1]!)).toMatchObject(clean);
  });

  it('redacts an error wherever it is in the record, not only under err', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const failure = Object.assign(new Error(`lookup of ${KEY} failed`), { key: 'opaque-secret', detail: KEY, config: { headers: { Authorization: `Bearer ${KEY}` } } });
    logger.info({ upstream: { failure }, list: [failure] }, 'nested error');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('opaque-secret');
    expect(lines[0]).not.toContain('S'.repeat(20));
    const line = JSON.parse(lines[0]!);
    expect(line.upstream.failure).toMatchObject({ message: 'lookup of acquirer_key_[redacted] failed', key: '[redacted]', detail: 'acquirer_key_[redacted]' });
    expect(line.upstream.failure.config.headers.Authorization).toBe('[redacted]');
    expect(line.list[0].message).toBe('lookup of acquirer_key_[redacted] failed');
  });

  it('keeps only the name of a Redis command, however deep its error is held', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const redisError = () => Object.assign(new Error('WRONGPASS'), { command: { name: 'auth', args: ['default', 'hunter2-secret'] } });
    const holder = Object.assign(new Error('outer'), { detail: redisError() });
    logger.warn({ err: new AggregateError([redisError()], 'several', { cause: redisError() }), context: { holder } }, 'deep redis errors');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('hunter2-secret');
    expect(JSON.parse(lines[0]!).context.holder.detail.command).toEqual({ name: 'auth' });
  });

  it('writes nothing nested deeper than it searches, secret or not', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const nest = (depth: number, leaf: object): object => (depth === 0 ? leaf : { n: nest(depth - 1, leaf) });
    const cyclic: Record<string, unknown> = { name: 'loop' };
    cyclic.self = cyclic;
    logger.info({ shallow: nest(5, { key: 'opaque-secret', text: KEY }), deep: nest(12, { key: 'opaque-secret', text: KEY }), cyclic }, 'nested');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('opaque-secret');
    expect(lines[0]).not.toContain('S'.repeat(20));
    const line = JSON.parse(lines[0]!);
    expect(line.shallow.n.n.n.n.n).toEqual({ key: '[redacted]', text: 'acquirer_key_[redacted]' });
    expect(JSON.stringify(line.deep)).toContain('[redacted: nested too deep]');
    expect(line.cyclic.name).toBe('loop');
  });

  it('writes an AggregateError that holds itself, under err or any other field, instead of throwing', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const loop = new AggregateError([new Error(`inner ${KEY}`)], `outer ${KEY}`);
    loop.errors.push(loop);
    expect(() => logger.error({ err: loop }, 'under err')).not.toThrow();
    expect(() => logger.error({ failure: { why: loop } }, 'elsewhere')).not.toThrow();
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toContain('S'.repeat(20));
      expect(line).toContain('outer acquirer_key_[redacted]');
    }
    expect(JSON.parse(lines[0]!).err).toMatchObject({ type: 'AggregateError', errors: '[redacted: refers to itself]' });
  });

  it('writes bytes as their count: a parse error\'s rawPacket holds what the upstream sent', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const packet = Buffer.from(`HTTP/1.1 200 OK\r\n\r\nmerchant_id,card_pan\r\nm1,4111111111111111 ${KEY}`);
    const err = Object.assign(new Error('Parse Error: Invalid header value char'), { code: 'HPE_INVALID_HEADER_TOKEN', rawPacket: packet });
    logger.warn({ err, elsewhere: { chunk: new Uint8Array(packet), buffer: packet.buffer.slice(0, 10) } }, 'upstream request failed');
    expect(lines).toHaveLength(1);
    expect(lines[0]).not.toContain('4111');
    expect(lines[0]).not.toContain('"0":72');
    const line = JSON.parse(lines[0]!);
    expect(line.err.rawPacket).toBe(`[${packet.length} bytes]`);
    expect(line.elsewhere).toEqual({ chunk: `[${packet.length} bytes]`, buffer: '[10 bytes]' });
  });

  it('rebuilds objects that are not plain from their own fields, so no toJSON decides what is written', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    logger.info({ target: new URL('redis://gw:hunter2-secret@redis:6379/0') }, 'url');
    expect(lines[0]).not.toContain('hunter2-secret');
  });
});

describe('errors from libraries', () => {
  it('lose command arguments and URL passwords, and are redacted all the way down', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const redisError = Object.assign(new Error('WRONGPASS invalid username-password pair'), {
      command: { name: 'hello', args: ['3', 'AUTH', 'default', 'hunter2-secret'] },
    });
    const nested = new AggregateError([new Error(`inner ${KEY}`)], 'several failures');
    logger.warn({ err: redisError, context: 'redis connection redis://gw:hunter2-secret@redis:6379' }, 'key store problem');
    logger.warn({ err: nested }, 'aggregate');
    logger.info({ a: { b: { c: { d: { e: { f: KEY } } } } } }, 'deep');
    for (const line of lines) {
      expect(line).not.toContain('hunter2-secret');
      expect(line).not.toContain('S'.repeat(20));
    }
    expect(JSON.parse(lines[0]!).err.command).toEqual({ name: 'hello' });
    expect(JSON.parse(lines[0]!).context).toBe('redis connection redis://gw:[redacted]@redis:6379');
  });

  it("cut a URL's password out whatever comes before its `://`, and only the password", () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const long = `${'x'.repeat(40)}redis://u:pw1@h`;
    logger.info({ a: long, b: '-rediss://u:pw2@h/0', c: 'at ://u:pw3@h', d: 'mail me@example.com, see http://h/p?q=a:b@c', e: 'redis://u:p@ss@w0rd@h:6379/0 and redis://v:x@y@i' }, 'urls');
    expect(JSON.parse(lines[0]!)).toMatchObject({
      a: `${'x'.repeat(40)}redis://u:[redacted]@h`,
      b: '-rediss://u:[redacted]@h/0',
      c: 'at ://u:[redacted]@h',
      d: 'mail me@example.com, see http://h/p?q=a:b@c',
      // A password holding `@` is cut out whole (URL parsers end it at the last `@` of the authority).
      e: 'redis://u:[redacted]@h:6379/0 and redis://v:[redacted]@i',
    });
  });

  it('replace a text holding a percent-encoded URL with a password, however often encoded; a password cut out before is not taken for one', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    logger.info(
      {
        a: '/v1/x?next=redis%3A%2F%2Fgw%3Ahunter2%40redis%3A6379',
        b: 'at redis%253A%252F%252Fgw%253Ahunter2%2540redis',
        c: 'redis://gw:hunter2@redis:6379/0?note=%41',
        d: '/v1/x?next=https%3A%2F%2Fexample.com%2Fa%40b',
      },
      'encoded',
    );
    expect(JSON.parse(lines[0]!)).toMatchObject({
      a: '[redacted: holds a percent-encoded URL with a password]',
      b: '[redacted: holds a percent-encoded URL with a password]',
      c: 'redis://gw:[redacted]@redis:6379/0?note=%41',
      d: '/v1/x?next=https%3A%2F%2Fexample.com%2Fa%40b',
    });
    expect(lines[0]).not.toContain('hunter2');
  });
});

describe('flat records (the access and audit lines)', () => {
  const record = { request_id: 'r1', method: 'GET', path: '/v1/acquirer/eod_statements', status: 200, completed: true, code: null, upstream_ms: 0.5 };
  const withoutTime = (line: string) => line.replace(/"time":\d+,/, '');

  it('are the same line info() and warn() write, but for the time', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream, { pid: 4242 });
    logger.info(record, 'request');
    logger.flat('info', record, 'request');
    logger.warn(record, 'request');
    logger.flat('warn', record, 'request');
    expect(lines).toHaveLength(4);
    expect(withoutTime(lines[1]!)).toBe(withoutTime(lines[0]!));
    expect(withoutTime(lines[3]!)).toBe(withoutTime(lines[2]!));
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 30, service: 'acquirer-gateway', pid: 4242, ...record, msg: 'request' });
    expect(JSON.parse(lines[3]!).level).toBe(40);
    expect(Math.abs(JSON.parse(lines[1]!).time - Date.now())).toBeLessThan(60_000);
  });

  it("are, as an event, the line event() writes, at the event's level or the one the logger was given for it", () => {
    const { lines, stream } = capture();
    const audit = { request_id: 'r1', method: 'POST', path: '/v1/x', route: null, status: 201, key_id: 'key_1', acquirer_id: 'acq_1', client: '127.0.0.1', body_bytes: 44 };
    createLogger('info', stream).event('audit', audit);
    createLogger('info', stream).flatEvent('audit', audit);
    createLogger('info', stream, {}, { eventLevels: { audit: 'warn' } }).event('audit', audit);
    createLogger('info', stream, {}, { eventLevels: { audit: 'warn' } }).flatEvent('audit', audit);
    createLogger('warn', stream).flatEvent('audit', audit);
    expect(lines).toHaveLength(4);
    expect(withoutTime(lines[1]!)).toBe(withoutTime(lines[0]!));
    expect(withoutTime(lines[3]!)).toBe(withoutTime(lines[2]!));
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 30, event: 'audit', ...audit });
    expect(JSON.parse(lines[3]!).level).toBe(40);
  });

  it('are, for any record of one level, the line info() writes, byte for byte but for the time', () => {
    // Names lean towards secret ones in other cases; strings towards what JSON escapes and keys.
    const name = fc.oneof(fc.constantFrom('key', 'KEY', 'Authorization', '\u212Aey', 'path', 'a"b', 'x\ny', '0', '12'), fc.string({ maxLength: 8 }));
    const text = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom(KEY, `/v1/x?k=${KEY}`, 'say "hi"\n', 'back\\slash', '\u0000\u001f\u007f', 'é€😀', 'redis://u:pw@h', 'acquirer%5Fkey_abcdefgh'),
    );
    // Whole thousandths (the access line's milliseconds) are printed from integers: at every size and sign.
    const thousandths = fc.integer({ min: -(2 ** 32), max: 2 ** 32 }).map((k) => k / 1000);
    const value = fc.oneof(text, fc.double(), fc.integer(), thousandths, fc.boolean(), fc.constant(null), fc.constant(undefined));
    fc.assert(
      fc.property(fc.dictionary(name, value, { maxKeys: 8 }), fc.oneof(fc.constant('request'), text), (record, msg) => {
        const { lines, stream } = capture();
        const logger = createLogger('info', stream);
        logger.info(record, msg);
        logger.flat('info', record, msg);
        expect(lines).toHaveLength(2);
        expect(withoutTime(lines[1]!)).toBe(withoutTime(lines[0]!));
      }),
      { numRuns: 300 },
    );
  });

  it('escape a lone surrogate, which pino writes raw (and UTF-8 then replaces)', () => {
    const { lines, stream } = capture();
    createLogger('info', stream).flat('info', { note: 'a\ud800b' }, 'request');
    expect(lines[0]).toContain('"note":"a\\ud800b"');
    expect(JSON.parse(lines[0]!).note).toBe('a\ud800b');
  });

  it("are left out below the logger's level, also once the level is changed", () => {
    const { lines, stream } = capture();
    const logger = createLogger('warn', stream);
    logger.flat('info', record, 'request');
    logger.flat('warn', record, 'request');
    expect(lines.map((l) => JSON.parse(l).level)).toEqual([40]);
    // The gateway never changes it (its Logger type has no level); pino itself allows it.
    const pinoLevel = logger as unknown as { level: string };
    pinoLevel.level = 'info';
    logger.flat('info', record, 'request');
    pinoLevel.level = 'error';
    logger.flat('info', record, 'request');
    logger.flat('warn', record, 'request');
    logger.flatEvent('audit', record);
    expect(lines.map((l) => JSON.parse(l).level)).toEqual([40, 30]);
  });

  it('are redacted like any other record', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    logger.flat('info', { path: `/v1/x?api_key=${KEY}`, key: 'opaque-secret', note: 'say "hi"\n' }, `msg ${KEY}`);
    expect(lines[0]).not.toContain('S'.repeat(20));
    expect(lines[0]).not.toContain('opaque-secret');
    expect(JSON.parse(lines[0]!)).toMatchObject({ path: '/v1/x?api_key=acquirer_key_[redacted]', key: '[redacted]', note: 'say "hi"\n', msg: 'msg acquirer_key_[redacted]' });
  });

  it('lose a key however it is percent-encoded, and whatever the case of its prefix', () => {
    const { lines, stream } = capture();
    const logger = createLogger('info', stream);
    const body = KEY.slice('acquirer_key_'.length);
    const hex = (c: string) => '%' + c.charCodeAt(0).toString(16).toUpperCase();
    const paths = [
      `/v1/x?api_key=acquirer%5Fkey_${body}`, // the prefix's underscore encoded
      `/v1/x?k=${KEY.slice(0, 20)}%2D${body.slice(7)}`, // a character of the body encoded
      `/v1/x?k=${[...KEY].map(hex).join('')}`, // every character encoded
      `/v1/x?k=acquirer%255Fkey_${body}`, // encoded twice
      `/v1/x?k=acquirer%2525255Fkey_${body}`, // four times, as deep as decoding goes
      `/v1/x?k=acquirer%252525255Fkey_${body}`, // five times: past it, replaced all the same
      `/v1/x?k=ACQUIRER_KEY_${body}`, // the prefix in upper case
      `AcQuIrEr_kEy_${body}`, // in mixed case, at the very start
    ];
    for (const path of paths) logger.flat('info', { path }, 'request');
    expect(lines).toHaveLength(paths.length);
    for (const line of lines) {
      expect(line).not.toContain(body.slice(10, 30));
      expect(line).not.toContain(body.slice(10, 30).split('').map(hex).join(''));
    }
    expect(lines.map((l) => JSON.parse(l).path)).toEqual([
      '[redacted: holds a percent-encoded key]',
      '/v1/x?k=acquirer_key_[redacted]',
      '[redacted: holds a percent-encoded key]',
      '[redacted: holds a percent-encoded key]',
      '[redacted: holds a percent-encoded key]',
      '[redacted: holds a percent-encoded key]',
      '/v1/x?k=acquirer_key_[redacted]',
      'acquirer_key_[redacted]',
    ]);
  });
});

describe('the access line\'s path', () => {
  it('loses a key\'s random part standing alone, not only a whole key, and is cut at 512 characters', () => {
    const body = 'RbIL7GCn_NE2Al9PxbJ18r6w5rAagZSkraEvZDALRNw'; // as generateKey makes them: mixed case
    expect(loggedPath(`/v1/acquirer/eod_statements?a=acquirer_key_&b=${body}`)).toBe('/v1/acquirer/eod_statements?a=acquirer_key_&b=[redacted]');
    expect(loggedPath(`/${body}`)).toBe('/[redacted]');
    expect(loggedPath('/v1/acquirer/eod_statements/9b2f4c1e-6d7a-4e8b-9c0d-1a2b3c4d5e6f.csv')).toBe('/v1/acquirer/eod_statements/9b2f4c1e-6d7a-4e8b-9c0d-1a2b3c4d5e6f.csv');
    expect(loggedPath(`/${'a'.repeat(600)}`)).toBe(`/${'a'.repeat(511)}…`);
  });
});

describe('the access line', () => {
  const fields = ['event', 'request_id', 'client_request_id', 'method', 'path', 'route', 'status', 'decision', 'code', 'acquirer_id', 'key_id', 'client', 'duration_ms', 'upstream_ms', 'upstream_status', 'completed'];

  it.each([
    [200, true, 30],
    [404, true, 30],
    [502, true, 40],
    [200, false, 40],
  ])('has its fields in one order, and a status %i that completed %j is written at level %i', (status, completed, level) => {
    const { lines, stream } = capture();
    writeAccessLine(createLogger('info', stream), 'r1', 'their-1', 'GET', '/v1/x', 'things', status, 'allowed', null, 'acq_1', 'key_1', '203.0.113.5', 1.25, 0.5, null, completed);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(Object.keys(line)).toEqual(['level', 'time', 'service', ...fields, 'msg']);
    expect(line).toMatchObject({ level, event: 'request', request_id: 'r1', client_request_id: 'their-1', status, completed, duration_ms: 1.25, upstream_ms: 0.5, code: null, msg: 'request' });
  });
});

describe('clientRequestId', () => {
  it.each([
    [undefined, null],
    ['', null],
    [['a', 'b'], null],
    ['trace-123', 'trace-123'],
    ['a b\tc\u00e9', 'a_b_c_'],
    ['x'.repeat(300), 'x'.repeat(128)],
    [`acquirer_key_${'A1b2'.repeat(11)}`, null],
    [`${'A1b2_'.repeat(10)}`, null],
  ])('shows %j as %j', (header, shown) => {
    expect(clientRequestId(header as string | string[] | undefined)).toBe(shown);
  });
});
