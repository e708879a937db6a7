import { parsePolicy } from '../../../src/policy/load.js';
import { queryAllowed } from '../../../src/policy/match-query.js';
import { matchRoute } from '../../../src/policy/match-route.js';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { shippedPolicy, STATEMENT_ID } from '../../helpers/policy.js';

let policy: CompiledPolicy;
beforeAll(async () => {
  policy = await shippedPolicy();
});

const routeOf = (method: string, target: string) => {
  const match = matchRoute(policy, method, target);
  return match.kind === 'matched' ? match.route.id : match.kind;
};

describe('matchRoute with the shipped policy', () => {
  it.each([
    ['GET', '/v1/acquirer/eod_statements', 'eod_statements_list'],
    ['GET', '/v1/acquirer/eod_statements?page=2', 'eod_statements_list'],
    // The query is judged apart (queryAllowed), after the permission check.
    ['GET', '/v1/acquirer/eod_statements?page=2&per_page=50', 'eod_statements_list'],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv?page=2`, 'eod_statement_download'],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`, 'eod_statement_download'],
    ['GET', '/v1/acquirer/eod_statements/by_date/2024-02-29.csv', 'eod_statement_download_by_date'],
    ['GET', '/v1/acquirer/api_keys/permissions', 'api_keys_permissions'],
  ])('%s %s → %s', (method, target, expected) => {
    expect(routeOf(method, target)).toBe(expected);
  });

  it('keeps path and query apart, unchanged', () => {
    expect(matchRoute(policy, 'GET', '/v1/acquirer/eod_statements?page=20')).toMatchObject({
      kind: 'matched',
      path: '/v1/acquirer/eod_statements',
      query: '?page=20',
    });
  });

  it.each([
    ['POST', '/v1/acquirer/eod_statements'],
    ['HEAD', '/v1/acquirer/eod_statements'],
    ['OPTIONS', '/v1/acquirer/eod_statements'],
    ['get', '/v1/acquirer/eod_statements'],
    ['GET', '/v1/acquirer/EOD_statements'],
    ['GET', '/v1/acquirer/eod_statements/not-a-uuid.csv'],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID.toUpperCase()}.csv`],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID}`],
    ['GET', `/v1/acquirer/eod_statements/${STATEMENT_ID}.CSV`],
    ['GET', '/v1/acquirer/eod_statements/by_date/2023-02-29.csv'],
    ['GET', '/v1/acquirer/eod_statements/by_date/2024-13-01.csv'],
    ['GET', '/v1/acquirer/eod_statements/by_date/24-01-01.csv'],
    ['PATCH', '/v1/acquirer/merchants/acq_alpha_m1'],
    ['GET', '/v1/acquirer/merchants/acq_alpha_m1/payment_controls/card'],
    ['GET', '/v1/acquirer/merchants/-leading-hyphen'],
    ['GET', '/'],
  ])('%s %s → not_found', (method, target) => {
    expect(routeOf(method, target)).toBe('not_found');
  });

  it.each([
    '/v1/acquirer/eod_statements/',
    '/v1/acquirer//eod_statements',
    '/v1/acquirer/./eod_statements',
    '/v1/acquirer/x/../eod_statements',
    '/v1/acquirer/eod_statements/..',
    '/v1/acquirer/eod_statements/.',
    '/v1/acquirer/eod%5Fstatements',
    '/v1/acquirer%2Feod_statements',
    '/v1/acquirer/eod_statements%2e',
    '/v1\\acquirer\\eod_statements',
    '/v1/acquirer/eod_statements;jsessionid=1',
    '/v1/acquirer/eod_statements#frag',
    '/v1/acquirer/eod_statements?x=1#frag',
    '/v1/acquirer/eod_statements?x=\u00e9',
    '/v1/acquirer/eod_stat\u00e9ments',
    '/v1/acquirer/eod_statements\t',
    'http://upstream/v1/acquirer/eod_statements',
    '*',
    'v1/acquirer/eod_statements',
    '',
  ])('refuses the non-canonical target %j', (target) => {
    expect(routeOf('GET', target)).toBe('non_canonical');
  });
});

describe('queryAllowed with the shipped policy', () => {
  const route = (target: string) => {
    const match = matchRoute(policy, 'GET', target);
    if (match.kind !== 'matched') throw new Error(`${target} matched no route`);
    return match.route;
  };
  const LIST = '/v1/acquirer/eod_statements';
  const CSV = `/v1/acquirer/eod_statements/${STATEMENT_ID}.csv`;

  // Judged as the upstream reads them: an encoded name or value is the name or value it decodes to.
  it.each([LIST, `${LIST}?`, `${LIST}?page=1`, `${LIST}?page=20`, `${LIST}?%70age=1`, `${LIST}?page=%31`, CSV, `${CSV}?`])('takes %j', (target) => {
    expect(queryAllowed(route(target), target)).toBe(true);
  });

  it.each([
    `${LIST}?page=2&per_page=50`, // not declared
    `${LIST}?acquirer_id=acq_2`,
    `${LIST}?page=1&page=2`, // twice
    `${LIST}?page=01`, // not an integer as declared
    `${LIST}?page=0`, // pages start at 1
    `${LIST}?page`, // no value
    `${LIST}?page=`,
    `${LIST}?page=1&`, // an empty pair
    `${LIST}?page=1&%70age=2`, // twice, once encoded
    `${LIST}?page=%30`, // an encoded 0
    `${CSV}?page=2`, // a route that takes none
  ])('refuses %j', (target) => {
    expect(queryAllowed(route(target), target)).toBe(false);
  });

  /** The statement routes alone, each with the query declaration given (`''`: none). */
  const statementsWithQuery = (query: string) =>
    policyOfRoutes([
      `{ id: list, method: GET, path: ${LIST}, permissions: [eod_list]${query} }`,
      `{ id: csv, method: GET, path: /v1/acquirer/eod_statements/:id.csv, params: { id: uuid }, permissions: [eod_list]${query} }`,
    ]);

  it('lets a route that declares no query take none: forwarding any is asked for, never the default', () => {
    const policy = statementsWithQuery('');
    for (const target of [`${CSV}?acquirer_id=acq_2`, `${LIST}?page=1`]) {
      const match = matchRoute(policy, 'GET', target);
      expect(match.kind === 'matched' && queryAllowed(match.route, target)).toBe(false);
    }
    const bare = matchRoute(policy, 'GET', `${LIST}?`);
    expect(bare.kind === 'matched' && queryAllowed(bare.route, `${LIST}?`)).toBe(true);
  });

  it('lets a route with `query: any` take any', () => {
    const policy = statementsWithQuery(', query: any');
    const match = matchRoute(policy, 'GET', `${CSV}?anything=at&all`);
    expect(match.kind === 'matched' && queryAllowed(match.route, `${CSV}?anything=at&all`)).toBe(true);
  });
});

describe('HEAD', () => {
  it('matches only a route that declares it, never a GET route', () => {
    const policy = policyOfRoutes([
      '{ id: csv, method: GET, path: /v1/statements/:id.csv, params: { id: uuid }, permissions: [eod_list] }',
      '{ id: csv_head, method: HEAD, path: /v1/statements/:id.csv, params: { id: uuid }, permissions: [eod_list] }',
      '{ id: list, method: GET, path: /v1/statements, permissions: [eod_list] }',
    ]);
    const id = (method: string, target: string) => {
      const match = matchRoute(policy, method, target);
      return match.kind === 'matched' ? match.route.id : match.kind;
    };
    expect([id('HEAD', `/v1/statements/${STATEMENT_ID}.csv`), id('GET', `/v1/statements/${STATEMENT_ID}.csv`), id('HEAD', '/v1/statements')]).toEqual(['csv_head', 'csv', 'not_found']);
  });
});

/** A policy of one permission, eod_list, and the routes given (YAML flow mappings). */
function policyOfRoutes(routes: string[]): CompiledPolicy {
  const result = parsePolicy(
    `version: 1\nacquirer_header: X-Acquirer-Id\npermissions:\n  - { name: eod_list, description: List statements }\nroutes:\n${routes.map((r) => `  - ${r}\n`).join('')}`,
    'p.yaml',
  );
  if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
  return result.policy;
}
