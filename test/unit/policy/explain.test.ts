import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPipeline } from '../../../src/app/pipeline.js';
import { UsageError } from '../../../src/cli/command-line.js';
import { explanationText, upstreamSigning } from '../../../src/cli/policy-explain.js';
import { errorBody } from '../../../src/errors/error-response.js';
import type { ApiKeyRecord } from '../../../src/keys/api-key.js';
import { KeyResolver } from '../../../src/keys/key-resolver.js';
import { toVerdict } from '../../../src/keys/key-verdict.js';
import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { parseAddress } from '../../../src/net/ip-allowlist.js';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { explainRequest, type ExplainedKey, type Explanation } from '../../../src/policy/explain.js';
import { parsePolicy } from '../../../src/policy/load.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { newRecord } from '../../helpers/key-store-contract.js';
import { rateLimitedPolicyText, STATEMENT_ID, shippedPolicy } from '../../helpers/policy.js';
import { startUpstream, type RecordingUpstream } from '../../helpers/upstream.js';

let policy: CompiledPolicy;
beforeAll(async () => {
  policy = await shippedPolicy();
});

/** A record as the request path reads it (toVerdict), as `policy explain` passes it. */
function keyOf(record: ApiKeyRecord): ExplainedKey {
  const verdict = toVerdict(record);
  if (verdict.kind === 'valid') return { kind: 'valid', ...verdict.key, allowedIps: record.allowed_ips };
  return { kind: 'disabled', id: record.id, acquirerId: record.acquirer_id, disabledAt: record.disabled_at! };
}

function explain(method: string, target: string, record: Partial<ApiKeyRecord> = {}, from?: string): Explanation {
  return explainRequest(policy, keyOf(newRecord(record)), { method, target, from: from === undefined ? undefined : parseAddress(from)! });
}

const outcomes = (explanation: Explanation) => explanation.steps.map((step) => `${step.title}: ${step.outcome}`);
const refusing = (explanation: Explanation) => explanation.steps.find((step) => step.outcome === 'refuses');

describe('the steps', () => {
  it("are the pipeline's, in its order (the request guard aside: explain builds a well-formed request)", () => {
    const pipeline = createPipeline({ resolver: new KeyResolver(new MemoryKeyStore()), trustedProxies: null, proxy: () => {} }).map((step) => step.name);
    const judged = [...new Set(explain('GET', '/v1/acquirer/eod_statements').steps.map((step) => step.step))];
    expect(judged).toEqual(pipeline.filter((name) => name !== 'requestGuard'));
  });

  it('after a refusal are not reached', () => {
    expect(outcomes(explain('GET', '/v1/acquirer/eod_statements', { permissions: ['eod_list'] }))).toEqual([
      'key: passes',
      'client address: passes',
      'route: passes',
      'permission: refuses',
      'query: not reached',
      'body (head): not reached',
      'rate: not reached',
      "acquirer's share: not reached",
      'body: not reached',
      'answer: not reached',
    ]);
  });
});

describe('the verdict', () => {
  it('of an allowed request: the method and target as forwarded, and the acquirer header from the key', () => {
    const explanation = explain('GET', '/v1/audit_logs?created_at%5Bgte%5D=2026-11-01&items=5', { acquirer_id: 'acq_7', permissions: ['audit_logs_read'] });
    expect(explanation.verdict).toEqual({ kind: 'forwarded', method: 'GET', target: '/v1/audit_logs?created_at%5Bgte%5D=2026-11-01&items=5', header: { name: 'x-acquirer-id', value: 'acq_7' } });
  });

  it("the transactions CSV takes the list's query, its page and items too", () => {
    const target = '/v1/transactions.csv?page=2&items=100&status%5B%5D=captured&sort%5Bdir%5D=desc';
    const explanation = explain('GET', target, { acquirer_id: 'acq_7', permissions: ['orders_read'] });
    expect(explanation.verdict).toEqual({ kind: 'forwarded', method: 'GET', target, header: { name: 'x-acquirer-id', value: 'acq_7' } });
  });

  it.each([
    ['a disabled key', 'GET', '/v1/acquirer/eod_statements', { disabled_at: '2026-01-02T03:04:05.000Z' }, undefined, 'API_KEY_DISABLED', 401, /^key_\w+ \(acquirer acq_1\) was disabled at 2026-01-02T03:04:05.000Z$/],
    ['an address outside the whitelist', 'GET', '/v1/acquirer/eod_statements', { allowed_ips: ['203.0.113.0/24'] }, '198.51.100.7', 'IP_NOT_ALLOWED', 401, /^198\.51\.100\.7 is outside the key's whitelist \(203\.0\.113\.0\/24\)$/],
    ['no route for the path', 'GET', '/v1/acquirer/nothing', {}, undefined, 'ROUTE_NOT_FOUND', 404, /^no route of the policy matches GET \/v1\/acquirer\/nothing$/],
    ['a path declared for another method', 'DELETE', '/v1/acquirer/merchants', {}, undefined, 'ROUTE_NOT_FOUND', 404, /^no DELETE route matches \/v1\/acquirer\/merchants; it is a route for GET \(merchants_list\), POST \(merchants_create\)$/],
    ['a path parameter not of its type', 'GET', '/v1/acquirer/eod_statements/not-a-uuid.csv', {}, undefined, 'ROUTE_NOT_FOUND', 404, /^no route of the policy matches/],
    ['a target not in canonical form', 'GET', '/v1/acquirer/../eod_statements', {}, undefined, 'NON_CANONICAL_PATH', 404, /^the target is not in canonical form/],
    ['a missing permission', 'GET', '/v1/acquirer/eod_statements', { permissions: ['eod_list'] }, undefined, 'PERMISSION_DENIED', 403, /^the key lacks eod_read \(the route requires eod_list, eod_read\)$/],
    ['a missing permission and a bad query: the permission first', 'GET', '/v1/acquirer/eod_statements?acquirer_id=acq_2', { permissions: [] }, undefined, 'PERMISSION_DENIED', 403, /^the key lacks eod_list, eod_read/],
    ['an undeclared query parameter', 'GET', '/v1/acquirer/eod_statements?acquirer_id=acq_2', {}, undefined, 'QUERY_NOT_ALLOWED', 400, /^acquirer_id is not a parameter of the route \(the route takes page: positive_integer\)$/],
  ] as const)('of %s: the refusal and its exact answer', (_what, method, target, record, from, code, status, says) => {
    const explanation = explain(method, target, record, from);
    expect(explanation.verdict).toEqual({ kind: 'refused', step: refusing(explanation)!.step, code, status, body: errorBody(status).toString() });
    expect(refusing(explanation)!.says).toMatch(says);
  });

  it('of the permission catalogue: answered by the gateway, with its body', () => {
    const explanation = explain('GET', '/v1/acquirer/api_keys/permissions?anything=1', { permissions: [] });
    expect(explanation.verdict).toEqual({ kind: 'served', status: 200, body: policy.catalogueBody.toString() });
    expect(explanation.steps.find((step) => step.title === 'query')!.says).toBe('any, unread: the gateway answers the route itself');
  });
});

describe('with ACQUIRER_SIGNING_SECRET', () => {
  const NEW = 'new-secret-0123456789abcdefghijklmnop';
  const OLD = 'old-secret-0123456789abcdefghijklmnop';
  const NOW_MS = 1_767_225_600_987;
  const T = 1_767_225_600;
  const hmac = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');

  it("a forwarded request lists the key id and the signature the proxy's signer computes for that second, one v1 per secret", () => {
    const sign = upstreamSigning({ ACQUIRER_SIGNING_SECRET: `${NEW},${OLD}` }, () => NOW_MS)!;
    const target = '/v1/acquirer/eod_statements?page=2';
    const record = newRecord({ acquirer_id: 'acq_7', permissions: ['eod_list', 'eod_read'] });
    const explanation = explainRequest(policy, keyOf(record), { method: 'GET', target }, sign);
    // The signed text as docs/security.md gives it, computed here apart from the gateway's code.
    const text = `${T}\nGET\n${target}\nacq_7\n${record.id}`;
    expect(explanation.verdict).toEqual({
      kind: 'forwarded',
      method: 'GET',
      target,
      header: { name: 'x-acquirer-id', value: 'acq_7' },
      signed: [
        { name: 'x-acquirer-key-id', value: record.id },
        { name: 'x-acquirer-signature', value: `t=${T},v1=${hmac(NEW, text)},v1=${hmac(OLD, text)}` },
      ],
    });
    expect(explanation.steps.at(-1)!.says).toBe('proxied upstream: the request-target exactly as sent, the acquirer header set from the key, signed (ACQUIRER_SIGNING_SECRET)');
    const printed = explanationText(explanation, { method: 'GET', target, keyId: record.id }, 'policy.yaml');
    expect(printed).toContain(
      `\nallowed; the upstream receives\n  GET ${target}\n  x-acquirer-id: acq_7\n  x-acquirer-key-id: ${record.id}\n  x-acquirer-signature: t=${T},v1=${hmac(NEW, text)},v1=${hmac(OLD, text)}\n`,
    );
    expect(printed).not.toContain(NEW);
    expect(printed).not.toContain(OLD);
  });

  it('a refused or self-answered request is not signed: nothing goes upstream', () => {
    let signed = 0;
    const sign = () => {
      signed++;
      return [];
    };
    const record = newRecord({ permissions: ['eod_list'] });
    expect(explainRequest(policy, keyOf(record), { method: 'GET', target: '/v1/acquirer/eod_statements' }, sign).verdict.kind).toBe('refused');
    expect(explainRequest(policy, keyOf(record), { method: 'GET', target: '/v1/acquirer/api_keys/permissions' }, sign).verdict.kind).toBe('served');
    expect(signed).toBe(0);
  });

  it('unset: nothing signed, and no signature header listed', () => {
    expect(upstreamSigning({})).toBeUndefined();
    expect(upstreamSigning({ ACQUIRER_SIGNING_SECRET: '' })).toBeUndefined();
    const record = newRecord({ permissions: ['eod_list', 'eod_read'] });
    const explanation = explainRequest(policy, keyOf(record), { method: 'GET', target: '/v1/acquirer/eod_statements' }, undefined);
    expect(explanation.verdict).not.toHaveProperty('signed');
    expect(explanationText(explanation, { method: 'GET', target: '/v1/acquirer/eod_statements', keyId: record.id }, 'policy.yaml')).not.toMatch(/x-acquirer-(signature|key-id)/);
  });

  it('a value serve would refuse is a usage error naming the setting, never the value', () => {
    const short = 'too-short-a-secret';
    let thrown: unknown;
    try {
      upstreamSigning({ ACQUIRER_SIGNING_SECRET: short });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as Error).message).toMatch(/^invalid configuration: ACQUIRER_SIGNING_SECRET: /);
    expect((thrown as Error).message).not.toContain(short);
  });
});

describe('what cannot be judged', () => {
  it('without --from: the whitelist is named, with the answer from outside it', () => {
    const step = explain('GET', '/v1/acquirer/eod_statements', { allowed_ips: ['203.0.113.0/24', '2001:db8::/32'] }).steps[1]!;
    expect(step).toEqual({
      step: 'ipWhitelist',
      title: 'client address',
      outcome: 'not judged',
      says: "no --from given; the key's whitelist is 203.0.113.0/24, 2001:db8::/32",
      unless: 'from outside 203.0.113.0/24, 2001:db8::/32: 401 {"message":"Invalid authentication information"}',
    });
  });

  it('an IPv4-mapped address is the IPv4 one, as the gateway reads it', () => {
    expect(explain('GET', '/v1/acquirer/eod_statements', { allowed_ips: ['203.0.113.0/24'] }, '::ffff:203.0.113.9').steps[1]!.outcome).toBe('passes');
  });

  it("a body: the route's media types and largest size, and the refusals it could earn", () => {
    const explanation = explain('POST', '/v1/acquirer/merchants/m1/users', { permissions: ['merchant_users_create'] });
    const head = explanation.steps.find((step) => step.title === 'body (head)')!;
    expect(head.says).toBe('no body given; the route takes application/json, at most 16384 bytes');
    expect(head.unless).toBe('a Content-Type other than application/json, or none: 415 {"message":"Unsupported media type"}; a Content-Length over 16384: 413 {"message":"Payload too large"}');
    expect(explanation.steps.find((step) => step.title === 'body')!.says).toBe('read whole, then one JSON value with no member named acquirer_id, acquirer at any depth');
    expect(explanation.verdict.kind).toBe('forwarded');
  });

  it('a route without a body says a request with one is refused', () => {
    expect(explain('GET', '/v1/acquirer/eod_statements').steps.find((step) => step.title === 'body (head)')!.says).toBe('none given, and the route takes none (one is refused: 400 {"message":"Bad request"})');
  });
});

describe('a query refused says which parameter, and why', () => {
  it.each([
    ['/v1/audit_logs?items=0', 'items: "0" is not integer 1..100'],
    ['/v1/audit_logs?created_at[gte]=2026-11-01T00:00:00+03:00', 'created_at[gte]: "2026-11-01T00:00:00 03:00" is not date_or_date_time'],
    ['/v1/audit_logs?page=1&page=2', 'page is given more than once'],
    [`/v1/transactions?${Array.from({ length: 11 }, () => 'status[]=captured').join('&')}`, 'status[] is given more than 10 times'],
    ['/v1/audit_logs?items=%3', '"%3" cannot be decoded: a % that is no escape, or bytes that are not UTF-8'],
    ['/v1/audit_logs?items', '"items" has no "=": each parameter is name=value'],
    ['/v1/audit_logs?items=1&&page=2', 'an empty pair (`&&`, or `&` at an end)'],
    ['/v1/audit_logs?acquirer%5Fid=acq_2', 'acquirer_id is not a parameter of the route'],
  ])('%s', (target, problem) => {
    const key = { permissions: ['audit_logs_read', 'orders_read'] };
    const says = refusing(explain('GET', target, key))!.says;
    expect(says.slice(0, says.indexOf(' (the route takes'))).toBe(problem);
  });
});

describe("explain's verdict is the gateway's answer", () => {
  let t: TestApp;
  let upstream: RecordingUpstream;
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    upstream = await startUpstream();
    t = await createTestApp({ upstreamUrl: upstream.url });
    server = http.createServer(t.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    t.close();
    await new Promise((resolve) => server.close(resolve));
    await upstream.close();
  });

  // The test's requests come from 127.0.0.1: that is their client address.
  it.each([
    ['GET', '/v1/acquirer/eod_statements?page=2', {}],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`, { allowed_ips: ['127.0.0.0/8'] }],
    ['GET', '/v1/acquirer/eod_statements', { allowed_ips: ['203.0.113.0/24'] }],
    ['GET', '/v1/acquirer/eod_statements', { disabled_at: '2026-01-01T00:00:00.000Z' }],
    ['GET', '/v1/acquirer/eod_statements', { permissions: ['eod_read'] }],
    ['GET', '/v1/acquirer/eod_statements?page=x', {}],
    ['GET', '/v1/acquirer/eod_statements?page=1&page=1', {}],
    ['GET', '/v1/acquirer/eod_statements/', {}],
    ['HEAD', '/v1/acquirer/eod_statements', {}],
    ['POST', '/v1/acquirer/eod_statements', {}],
    ['GET', '/v1/acquirer/api_keys/permissions?x=1', { permissions: ['orders_read'] }],
    ['PUT', '/v1/acquirer/merchants/m_1/activate', { acquirer_id: 'acq_9', permissions: ['merchants_update'] }],
  ] as const)('%s %s for a key %j', async (method, target, overrides) => {
    const { key, record } = await t.addKey(overrides);
    const explanation = explainRequest(policy, keyOf(record), { method, target, from: parseAddress('127.0.0.1')! });
    const before = upstream.received.length;
    const answer = await request(url, target, { authorization: `Bearer ${key}` }, method);
    const { verdict } = explanation;
    if (verdict.kind === 'forwarded') {
      const seen = upstream.received.slice(before);
      expect(seen.map((r) => [r.method, r.url, r.headers[verdict.header.name]])).toEqual([[verdict.method, verdict.target, verdict.header.value]]);
      return;
    }
    expect(upstream.received.length).toBe(before);
    expect([answer.status, method === 'HEAD' ? '' : answer.body.toString()]).toEqual([verdict.status, method === 'HEAD' ? '' : verdict.body]);
  });
});

describe('the rate step', () => {
  it('names the budget a key takes from and what it is told over it, without judging what is left (explain cannot see the load)', () => {
    const parsed = parsePolicy(rateLimitedPolicyText({ defaultRate: '{ per_second: 20, burst: 40 }', downloadRate: '{ per_second: 0.2, burst: 3 }' }), 'rates.yaml');
    if (!parsed.ok) throw new Error('invalid test policy');
    const key = keyOf(newRecord({ id: 'key_rated' }));
    const rate = (target: string) => explainRequest(parsed.policy, key, { method: 'GET', target }).steps.find((step) => step.step === 'rateLimit');
    expect(rate('/v1/acquirer/eod_statements')).toEqual({
      step: 'rateLimit',
      title: 'rate',
      outcome: 'not judged',
      says: "key_rated may make 20/s with a burst of 40, from the policy's default budget (rate_limits.default)",
      unless: 'over it: 429 {"message":"Too many requests"}, with Retry-After',
    });
    expect(rate(`/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`)?.says).toBe("key_rated may make 0.2/s with a burst of 3, from the route's own budget");
    expect(explain('GET', '/v1/acquirer/eod_statements').steps.find((step) => step.step === 'rateLimit')).toMatchObject({ outcome: 'passes', says: 'the policy declares no rate for the route' });
  });
});
