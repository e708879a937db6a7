import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSampleUpstream, sampleMerchants, sampleStatements } from '../../../src/demo/sample-upstream.js';
import { instantParam, parseQuery } from '../../../src/demo/sample-query.js';

const ACQUIRERS = ['acq_alpha', 'acq_beta'];
const USERS = '/v1/acquirer/merchants/acq_alpha_m1/users';
const CONTROLS = '/v1/acquirer/merchants/acq_alpha_m1/payment_controls';
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const START = Date.parse('2026-12-01T10:00:00Z');

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly json: any;
}

let server: http.Server;
let port: number;
let ticks: number;

beforeEach(async () => {
  // Each write reads the clock once: the n-th write is dated START + n seconds.
  ticks = 0;
  server = createSampleUpstream(sampleStatements(ACQUIRERS), { now: () => new Date(START + ++ticks * 1000) });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

interface CallOptions {
  readonly acquirer?: string | null;
  /** Sent as JSON; a string is sent as it is (with `Content-Type: application/json` unless `headers` say otherwise). */
  readonly body?: unknown;
  readonly headers?: http.OutgoingHttpHeaders;
  /** Send the body chunked, with no Content-Length. */
  readonly chunked?: boolean;
}

/** One request with the path exactly as written (no URL parser re-encodes it), on a fresh connection. */
function call(method: string, path: string, { acquirer = 'acq_alpha', body, headers = {}, chunked = false }: CallOptions = {}): Promise<Answer> {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const head: http.OutgoingHttpHeaders = {
    ...(acquirer === null ? {} : { 'x-acquirer-id': acquirer }),
    ...(payload === undefined ? {} : { 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': Buffer.byteLength(payload) }) }),
    ...headers,
  };
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: head, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const json = (res.headers['content-type'] ?? '').startsWith('application/json') ? JSON.parse(text) : undefined;
        resolve({ status: res.statusCode!, headers: res.headers, text, json });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

const createUser = (name: string, email: string, acquirer = 'acq_alpha', users = USERS) => call('POST', users, { acquirer, body: { name, email } });

describe('merchant users', () => {
  it('creates a user (201, Location) that can then be retrieved', async () => {
    const created = await call('POST', USERS, { body: { name: 'Ada Lovelace', email: 'ada@example.com', permissions: ['orders_read'] } });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({
      id: expect.stringMatching(UUID_V4),
      merchant_id: 'acq_alpha_m1',
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      description: null,
      permissions: ['orders_read'],
      status: 'invited',
      created_at: '2026-12-01T10:00:01.000Z',
      updated_at: '2026-12-01T10:00:01.000Z',
    });
    expect(created.headers.location).toBe(`${USERS}/${created.json.id}`);

    const retrieved = await call('GET', created.headers.location!);
    expect([retrieved.status, retrieved.json]).toEqual([200, created.json]);
  });

  it("answers 403 for another acquirer's user and 404 for an unknown one", async () => {
    const { json: user } = await createUser('Ada', 'ada@example.com');
    // Through alpha's merchant, and through beta's own merchant: either way the record is alpha's.
    expect((await call('GET', `${USERS}/${user.id}`, { acquirer: 'acq_beta' })).status).toBe(403);
    expect((await call('GET', `/v1/acquirer/merchants/acq_beta_m1/users/${user.id}`, { acquirer: 'acq_beta' })).status).toBe(403);
    expect((await call('PUT', `${USERS}/${user.id}/disable`, { acquirer: 'acq_beta' })).status).toBe(403);
    expect((await call('GET', `/v1/acquirer/merchants/acq_alpha_m2/users/${user.id}`)).status).toBe(404);
    expect((await call('GET', `${USERS}/00000000-0000-4000-8000-000000000000`)).status).toBe(404);
    const unknownMerchant = await call('GET', '/v1/acquirer/merchants/acq_gamma_m1/users');
    expect([unknownMerchant.status, unknownMerchant.json]).toEqual([404, { message: 'merchant not found' }]);
  });

  it('lists a merchant\'s users as a bare array, sorted as `sort[field]` and `sort[dir]` ask, even percent-encoded', async () => {
    for (const [name, email] of [['bob', 'bob@example.com'], ['Carol', 'carol@example.com'], ['Alice', 'alice@example.com']]) await createUser(name!, email!);
    await createUser('Zed', 'zed@example.com', 'acq_alpha', '/v1/acquirer/merchants/acq_alpha_m2/users');
    const names = async (query: string) => {
      const res = await call('GET', `${USERS}${query}`);
      expect(res.status).toBe(200);
      return (res.json as { name: string }[]).map((u) => u.name);
    };
    expect(await names('?sort%5Bfield%5D=name&sort%5Bdir%5D=desc')).toEqual(['Carol', 'bob', 'Alice']);
    expect(await names('?sort[field]=name&sort[dir]=asc')).toEqual(['Alice', 'bob', 'Carol']);
    expect(await names('?sort%5bfield%5d=email&sort%5Bdir%5D=desc')).toEqual(['Carol', 'bob', 'Alice']);
    expect(await names('')).toEqual(['bob', 'Carol', 'Alice']); // oldest first
    const bad = await call('GET', `${USERS}?sort%5Bfield%5D=status`);
    expect([bad.status, bad.json.errors]).toEqual([422, { 'sort[field]': ['must be one of name, email, created_at, updated_at'] }]);
    expect((await call('GET', USERS, { acquirer: 'acq_beta' })).status).toBe(403);
  });

  it('updates name, description and permissions, and refuses to change the email', async () => {
    const { json: user } = await createUser('Ada', 'ada@example.com');
    const updated = await call('PUT', `${USERS}/${user.id}`, { body: { name: 'Ada L.', description: 'finance', permissions: ['3ds_read'] } });
    expect(updated.status).toBe(200);
    expect(updated.json).toEqual({ ...user, name: 'Ada L.', description: 'finance', permissions: ['3ds_read'], updated_at: '2026-12-01T10:00:02.000Z' });
    expect((await call('GET', `${USERS}/${user.id}`)).json).toEqual(updated.json);

    const email = await call('PUT', `${USERS}/${user.id}`, { body: { name: 'x', email: 'other@example.com' } });
    expect([email.status, email.json]).toEqual([422, { message: 'email cannot be changed', errors: { email: ['cannot be changed'] } }]);
    expect((await call('GET', `${USERS}/${user.id}`)).json.name).toBe('Ada L.');
  });

  it('disables a user (PUT …/disable, no body)', async () => {
    const { json: user } = await createUser('Ada', 'ada@example.com');
    const disabled = await call('PUT', `${USERS}/${user.id}/disable`);
    expect([disabled.status, disabled.json.status, disabled.json.updated_at]).toEqual([200, 'disabled', '2026-12-01T10:00:02.000Z']);
    expect((await call('GET', `${USERS}/${user.id}`)).json.status).toBe('disabled');
  });

  it.each([
    ['no name', { email: 'a@example.com' }, { name: ["can't be blank"] }],
    ['no email', { name: 'A' }, { email: ["can't be blank"] }],
    ['an invalid email', { name: 'A', email: 'not an email' }, { email: ['is invalid'] }],
    ['an email taken in that merchant (any case)', { name: 'A', email: 'TAKEN@example.com' }, { email: ['has already been taken'] }],
    ['permissions not strings', { name: 'A', email: 'a@example.com', permissions: [1] }, { permissions: ['must be an array of strings'] }],
    ['a description not a string', { name: 'A', email: 'a@example.com', description: 7 }, { description: ['must be a string'] }],
    ['a body not an object', ['A'], { body: ['must be a JSON object'] }],
  ])('answers 422 to a create with %s', async (_case, body, errors) => {
    await createUser('Taken', 'taken@example.com');
    const res = await call('POST', USERS, { body });
    expect(res.status).toBe(422);
    expect(res.json).toEqual({ message: `Validation failed: ${Object.keys(errors)[0]} ${Object.values(errors)[0]![0]}`, errors });
  });

  it('takes an email used at another merchant', async () => {
    await createUser('Ada', 'ada@example.com');
    expect((await createUser('Ada', 'ada@example.com', 'acq_alpha', '/v1/acquirer/merchants/acq_alpha_m2/users')).status).toBe(201);
  });
});

describe('payment controls', () => {
  it('creates (201), lists, retrieves and deletes (204, no body)', async () => {
    const created = await call('POST', `${CONTROLS}/bin_range`, { body: { activity: 'deny', identifier: '400000-499999' } });
    expect(created.status).toBe(201);
    expect(created.json).toEqual({ id: expect.stringMatching(UUID_V4), merchant_id: 'acq_alpha_m1', type: 'bin_range', activity: 'deny', identifier: '400000-499999', created_at: '2026-12-01T10:00:01.000Z' });
    await call('POST', `${CONTROLS}/ip`, { body: { activity: 'allow', identifier: '192.0.2.1' } });

    const listed = await call('GET', `${CONTROLS}/bin_range`);
    expect([listed.status, listed.json]).toEqual([200, [created.json]]);
    expect((await call('GET', `${CONTROLS}/bin_range/${created.json.id}`)).json).toEqual(created.json);
    expect((await call('DELETE', `${CONTROLS}/bin_range/${created.json.id}`, { acquirer: 'acq_beta' })).status).toBe(403);
    expect((await call('DELETE', `${CONTROLS}/ip/${created.json.id}`)).status).toBe(404);

    const deleted = await call('DELETE', `${CONTROLS}/bin_range/${created.json.id}`);
    expect([deleted.status, deleted.text, deleted.headers['content-type']]).toEqual([204, '', undefined]);
    expect((await call('GET', `${CONTROLS}/bin_range`)).json).toEqual([]);
    expect((await call('DELETE', `${CONTROLS}/bin_range/${created.json.id}`)).status).toBe(404);
  });

  it.each([
    ['an activity other than allow or deny', { activity: 'block', identifier: 'x' }, { activity: ['must be allow or deny'] }],
    ['no identifier', { activity: 'allow' }, { identifier: ["can't be blank"] }],
  ])('answers 422 to %s', async (_case, body, errors) => {
    const res = await call('POST', `${CONTROLS}/pan`, { body });
    expect([res.status, res.json.errors]).toEqual([422, errors]);
  });

  it("answers 404 for a type the API does not have, and 403 for another acquirer's merchant", async () => {
    expect((await call('GET', `${CONTROLS}/colour`)).status).toBe(404);
    expect((await call('POST', `${CONTROLS}/eci`, { acquirer: 'acq_beta', body: { activity: 'allow', identifier: '05' } })).status).toBe(403);
  });
});

describe('audit logs', () => {
  /** Five writes, dated START + 1 s … + 5 s. */
  async function writeSome(): Promise<void> {
    const { json: user } = await createUser('Ada', 'ada@example.com');
    await call('PUT', `${USERS}/${user.id}`, { body: { name: 'Ada L.' } });
    await call('PUT', `${USERS}/${user.id}/disable`);
    const { json: control } = await call('POST', `${CONTROLS}/ip`, { body: { activity: 'deny', identifier: '198.51.100.7' } });
    await call('DELETE', `${CONTROLS}/ip/${control.id}`);
  }
  const actions = (res: Answer) => (res.json.audit_logs as { action_name: string }[]).map((e) => e.action_name);

  it('starts with the seeded merchants, per acquirer', async () => {
    const res = await call('GET', '/v1/audit_logs', { acquirer: 'acq_beta' });
    expect(res.status).toBe(200);
    expect(res.json.audit_logs.map((e: { subject_id: string }) => e.subject_id)).toEqual(sampleMerchants(['acq_beta']).acq_beta!.toReversed());
    expect(res.json.meta).toEqual({ current_page: 1, next_page: null, prev_page: null });
  });

  it('lists each write, newest first, filtered by created_at[gte] and [lte]', async () => {
    await writeSome();
    const recent = await call('GET', '/v1/audit_logs?created_at%5Bgte%5D=2026-12-01');
    expect(actions(recent)).toEqual(['payment_control.delete', 'payment_control.create', 'merchant_user.disable', 'merchant_user.update', 'merchant_user.create']);
    expect(recent.json.audit_logs[0]).toEqual({
      id: expect.stringMatching(UUID_V4),
      performer_type: 'api_key',
      action_type: 'delete',
      action_name: 'payment_control.delete',
      subject_type: 'payment_control',
      subject_id: expect.stringMatching(UUID_V4),
      created_at: '2026-12-01T10:00:05.000Z',
    });
    // An offset whose '+' arrived unencoded (a space): 11:00:03+01:00 is 10:00:03Z.
    expect(actions(await call('GET', '/v1/audit_logs?created_at[gte]=2026-12-01T11:00:03+01:00&created_at[lte]=2026-12-01T10:00:04Z'))).toEqual(['payment_control.create', 'merchant_user.disable']);
    expect(actions(await call('GET', '/v1/audit_logs?created_at[lte]=2026-11-30'))).toEqual(['merchant.create', 'merchant.create']);
    expect(actions(await call('GET', '/v1/audit_logs', { acquirer: 'acq_beta' }))).toEqual(['merchant.create', 'merchant.create']);
  });

  it('pages with items and page, countless', async () => {
    await writeSome();
    const second = await call('GET', '/v1/audit_logs?items=2&page=2');
    expect(actions(second)).toEqual(['merchant_user.disable', 'merchant_user.update']);
    expect(second.json.meta).toEqual({ current_page: 2, next_page: 3, prev_page: 1 });
    const last = await call('GET', '/v1/audit_logs?items=2&page=4');
    expect([actions(last), last.json.meta]).toEqual([['merchant.create'], { current_page: 4, next_page: null, prev_page: 3 }]);
    expect((await call('GET', '/v1/audit_logs?items=1')).json.meta).toEqual({ current_page: 1, next_page: 2, prev_page: null });
  });

  it.each([['items=0'], ['items=101'], ['page=0'], ['page=x'], ['created_at[gte]=yesterday']])('answers 422 to %s', async (query) => {
    expect((await call('GET', `/v1/audit_logs?${query}`)).status).toBe(422);
  });

  it("retrieves one entry, and answers 403 for another acquirer's", async () => {
    const [entry] = (await call('GET', '/v1/audit_logs')).json.audit_logs;
    expect((await call('GET', `/v1/audit_logs/${entry.id}`)).json).toEqual(entry);
    expect((await call('GET', `/v1/audit_logs/${entry.id}`, { acquirer: 'acq_beta' })).status).toBe(403);
  });
});

describe('requests the sample refuses', () => {
  it.each([
    ['invalid JSON', { body: '{"name":' }, 400, { message: 'invalid JSON' }],
    ['a body that is not JSON', { body: 'name=A', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, { message: 'Content-Type must be application/json' }],
    ['a body of more than 64 KiB', { body: { name: 'x'.repeat(64 * 1024), email: 'a@example.com' } }, 413, { message: 'request body larger than 65536 bytes' }],
    ['a chunked body of more than 64 KiB', { body: { name: 'x'.repeat(64 * 1024), email: 'a@example.com' }, chunked: true }, 413, { message: 'request body larger than 65536 bytes' }],
  ] as const)('%s', async (_case, options, status, json) => {
    const res = await call('POST', USERS, options);
    expect([res.status, res.json]).toEqual([status, json]);
    expect((await call('GET', USERS)).json).toEqual([]);
  });

  it('answers 405 with Allow for a method the path does not take, 404 for an unknown path, 401 without the acquirer', async () => {
    const wrong = await call('DELETE', USERS);
    expect([wrong.status, wrong.headers.allow]).toEqual([405, 'GET, POST']);
    expect((await call('GET', '/v1/acquirer/merchants/acq_alpha_m1/nothing')).status).toBe(404);
    expect((await call('GET', USERS, { acquirer: null })).status).toBe(401);
  });

  it('still serves the EOD statements, scoped the same way', async () => {
    const list = await call('GET', '/v1/acquirer/eod_statements');
    expect([list.status, list.json.eod_statements.length, list.json.meta.total_count]).toEqual([200, 3, 3]);
    const [first] = list.json.eod_statements;
    const csv = await call('GET', first.csv_file);
    expect([csv.status, csv.headers['content-type']]).toEqual([200, 'text/csv; charset=utf-8']);
    expect((await call('GET', first.csv_file, { acquirer: 'acq_beta' })).status).toBe(403);
    expect((await call('POST', '/v1/acquirer/eod_statements')).status).toBe(405);
  });
});

describe('reading the query', () => {
  it.each([
    ['sort%5Bfield%5D=name', 'sort[field]', 'name'],
    ['a=b+c', 'a', 'b c'],
    ['a=b%2Bc', 'a', 'b+c'],
    ['a=1&a=2', 'a', '1'],
    ['a=%ZZ', 'a', '%ZZ'],
    ['flag', 'flag', ''],
  ])('%s gives %s = %j', (query, name, value) => {
    expect(parseQuery(query).get(name)).toBe(value);
  });

  it.each([
    ['2026-12-01', '2026-12-01T00:00:00.000Z'],
    ['2026-12-01T10:00Z', '2026-12-01T10:00:00.000Z'],
    ['2026-12-01T11:00:00.5+01:00', '2026-12-01T10:00:00.500Z'],
    ['2026-12-01T11:00:00 0100', '2026-12-01T10:00:00.000Z'],
    ['2026-12-01T05:00:00-05:00', '2026-12-01T10:00:00.000Z'],
  ])('reads %s as the instant %s', (text, iso) => {
    expect(new Date(instantParam(new Map([['t', text]]), 't')!).toISOString()).toBe(iso);
  });

  it.each([['2026-12-01T10:00:00'], ['yesterday'], ['2026-13-01']])('refuses %s (no zone, or no date)', (text) => {
    expect(() => instantParam(new Map([['t', text]]), 't')).toThrow();
  });
});
