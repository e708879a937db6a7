import { readFileSync } from 'node:fs';
import { createShadowObserver } from '../../../src/app/shadow-observer.js';
import type { ErrorCode } from '../../../src/errors/codes.js';
import type { ResolvedKey } from '../../../src/keys/key-verdict.js';
import type { Logger } from '../../../src/observability/logger/logger.js';
import { createMetrics } from '../../../src/observability/metrics/metrics.js';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { parsePolicy } from '../../../src/policy/load.js';
import { enforcedVerdict, judgeByPolicy, SHADOW_VERDICTS } from '../../../src/policy/shadow.js';
import { metricValue } from '../../helpers/metrics.js';
import { SHIPPED_POLICY_FILE } from '../../helpers/policy.js';

const SHIPPED = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
const LIST_ROUTE = '    query: { page: positive_integer }\n    permissions: [eod_list, eod_read]\n';

/** The shipped policy with its list route's query and permissions line replaced. */
function variant(listRoute: string): CompiledPolicy {
  if (!SHIPPED.includes(LIST_ROUTE)) throw new Error('the shipped list route changed');
  const result = parsePolicy(SHIPPED.replace(LIST_ROUTE, listRoute), 'shadow.yaml');
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.policy;
}

const shipped = variant(LIST_ROUTE);
const stricter = variant('    query: { page: positive_integer }\n    permissions: [eod_list, eod_read, audit_logs_read]\n');
const noQuery = variant('    permissions: [eod_list, eod_read]\n');
const EOD = new Set(['eod_list', 'eod_read']);
const LIST = '/v1/acquirer/eod_statements';

describe('judgeByPolicy', () => {
  it.each([
    ['the shipped policy', shipped, 'GET', `${LIST}?page=2`, EOD, 'allow', 'eod_statements_list'],
    ['a route requiring one more permission', stricter, 'GET', `${LIST}?page=2`, EOD, 'forbidden', 'eod_statements_list'],
    ['a route that takes no query', noQuery, 'GET', `${LIST}?page=2`, EOD, 'bad_request', 'eod_statements_list'],
    ['a route that takes no query, asked none', noQuery, 'GET', LIST, EOD, 'allow', 'eod_statements_list'],
    ['no route for the method', shipped, 'DELETE', LIST, EOD, 'not_found', undefined],
    ['no route for the path', shipped, 'GET', '/v1/nowhere', EOD, 'not_found', undefined],
    // The permission is judged before the query, as the pipeline does.
    ['no permission and a bad query', stricter, 'GET', `${LIST}?page=x`, EOD, 'forbidden', 'eod_statements_list'],
  ])('%s', (_what, policy, method, target, permissions, verdict, route) => {
    const judged = judgeByPolicy(policy, method, target, permissions);
    expect({ verdict: judged.verdict, route: judged.route?.id }).toEqual({ verdict, route });
  });
});

describe('enforcedVerdict', () => {
  it.each<[ErrorCode | undefined, boolean, string | null]>([
    [undefined, true, 'allow'],
    ['ROUTE_NOT_FOUND', false, 'not_found'],
    ['PERMISSION_DENIED', true, 'forbidden'],
    ['QUERY_NOT_ALLOWED', true, 'bad_request'],
    // Refused after the policy allowed it.
    ['PAYLOAD_TOO_LARGE', true, 'allow'],
    ['ACQUIRER_BUSY', true, 'allow'],
    // Decided before the policy, alike by both.
    ['IP_NOT_ALLOWED', false, null],
    ['NON_CANONICAL_PATH', false, null],
    [undefined, false, null],
  ])('%s (route matched: %s) is %s', (code, matched, verdict) => {
    expect(enforcedVerdict(code, matched)).toBe(verdict);
  });

  it('speaks only of the closed set of verdicts', () => {
    expect(SHADOW_VERDICTS).toEqual(['allow', 'not_found', 'forbidden', 'bad_request']);
  });
});

describe('createShadowObserver', () => {
  const key: ResolvedKey = { id: 'key_1', acquirerId: 'acq_1', permissions: EOD, allowlist: null };
  const locals = (fields: Partial<Express.Locals>) => ({ policy: shipped, requestId: 'r', startedAt: 0, ...fields }) as Express.Locals;

  function observer(shadow: CompiledPolicy) {
    const metrics = createMetrics({ shadow: true });
    const lines: Record<string, unknown>[] = [];
    const logger = { event: (event: string, fields: Record<string, unknown>) => lines.push({ event, ...fields }) } as unknown as Logger;
    let now = 0;
    const judge = createShadowObserver({ shadow: () => shadow, metrics, logger, now: () => now });
    const count = async (labels: Record<string, string>) => metricValue(await metrics.registry.metrics(), 'acquirer_gateway_shadow_disagreements_total', labels);
    return { judge, lines, count, later: (ms: number) => (now += ms) };
  }

  it('counts and logs a disagreement, by the route id, never the raw target', async () => {
    const { judge, lines, count } = observer(stricter);
    judge('GET', `${LIST}?page=2`, locals({ key, route: shipped.routes[0] }));
    expect(await count({ route: 'eod_statements_list', enforced: 'allow', shadow: 'forbidden' })).toBe(1);
    expect(lines).toEqual([{ event: 'shadow_disagreement', key_id: 'key_1', acquirer_id: 'acq_1', route: 'eod_statements_list', method: 'GET', enforced: 'allow', shadow: 'forbidden' }]);
  });

  it('counts nothing where both agree, or where no valid key was given', async () => {
    const { judge, lines, count } = observer(shipped);
    judge('GET', `${LIST}?page=2`, locals({ key, route: shipped.routes[0] }));
    judge('GET', '/v1/nowhere', locals({ key, errorCode: 'ROUTE_NOT_FOUND' }));
    const strict = observer(stricter);
    strict.judge('GET', `${LIST}?page=2`, locals({ errorCode: 'API_KEY_UNKNOWN' }));
    expect([await count({}), await strict.count({}), lines, strict.lines]).toEqual([undefined, undefined, [], []]);
  });

  it('labels by the route either policy matched, and the method from a closed set', async () => {
    const { judge, lines, count } = observer(stricter);
    // Enforced refused the method; a shadow that did route it would say so: here neither does, so they agree.
    judge('BREW', '/v1/nowhere', locals({ key, errorCode: 'ROUTE_NOT_FOUND' }));
    expect(await count({})).toBeUndefined();
    // Enforced allowed a route the shadow does not have.
    const removed = observer(noRoute());
    removed.judge('GET', LIST, locals({ key, route: shipped.routes[0] }));
    expect(await removed.count({ route: 'eod_statements_list', enforced: 'allow', shadow: 'not_found' })).toBe(1);
    const unknownMethod = observer(shipped);
    unknownMethod.judge('BREW', LIST, locals({ key, route: { ...shipped.routes[0]!, id: 'brew' } }));
    expect(unknownMethod.lines[0]).toMatchObject({ route: 'brew', method: 'OTHER', enforced: 'allow', shadow: 'not_found' });
    expect(lines).toEqual([]);
  });

  it('writes at most one line a second per route and verdicts, saying how many were held back', async () => {
    const { judge, lines, count, later } = observer(stricter);
    for (let i = 0; i < 5; i++) judge('GET', LIST, locals({ key, route: shipped.routes[0] }));
    later(1_000);
    judge('GET', LIST, locals({ key, route: shipped.routes[0] }));
    expect(await count({ route: 'eod_statements_list', enforced: 'allow', shadow: 'forbidden' })).toBe(6);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ same_lines_unwritten: 4, unwritten_after_ms_ago: 1000 });
  });
});

/** The shipped policy without its list route. */
function noRoute(): CompiledPolicy {
  const text = SHIPPED.replace(/  - id: eod_statements_list\n(?: {4}.*\n)+/, '');
  const result = parsePolicy(text, 'shadow.yaml');
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.policy;
}
