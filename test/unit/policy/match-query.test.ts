import fc from 'fast-check';
import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { parsePolicy } from '../../../src/policy/load.js';
import { decodeComponent, queryAllowed } from '../../../src/policy/match-query.js';
import { matchRoute } from '../../../src/policy/match-route.js';
import { shippedPolicy } from '../../helpers/policy.js';

let shipped: CompiledPolicy;
beforeAll(async () => {
  shipped = await shippedPolicy();
});

/** Whether the shipped policy's route for a GET of `target` takes its query. */
function takes(target: string, policy = shipped): boolean {
  const match = matchRoute(policy, 'GET', target);
  if (match.kind !== 'matched') throw new Error(`${target} matched no route`);
  return queryAllowed(match.route, target);
}

/** A policy of one route, GET /things, with the query given as YAML. */
function withQuery(query: string): CompiledPolicy {
  const result = parsePolicy(`version: 1
acquirer_header: X-Tenant
permissions:
  - { name: things_read, description: Read things }
routes:
  - id: things_list
    method: GET
    path: /things
    query: ${query}
    permissions: [things_read]
`, 'inline.yaml');
  if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
  return result.policy;
}

describe('the query types of the live API, on the shipped routes', () => {
  const AUDIT = '/v1/audit_logs';
  const TRANSACTIONS = '/v1/transactions';
  it.each([
    `${AUDIT}?items=1`,
    `${AUDIT}?items=100&page=3`,
    `${AUDIT}?created_at[gte]=2026-11-01`,
    `${AUDIT}?created_at[gte]=2026-11-01T00:00:00Z&created_at[lte]=2026-11-28T23:59:59.999%2B03:00`,
    `${AUDIT}?created_at%5Bgte%5D=2026-11-01T00:00:00-05:30`, // a client library's encoding of the brackets
    `${AUDIT}?sort[field]=created_at&sort[dir]=desc`,
    `${AUDIT}?sort%5Bdir%5D=asc`,
    `${AUDIT}?performer_email=ada.lovelace%2Bapi@example.com`,
    `${AUDIT}?action_name=merchant_user.create`,
    `${TRANSACTIONS}?status[]=captured&status[]=refunded`,
    `${TRANSACTIONS}?status%5B%5D=captured&status[]=voided`,
    `${TRANSACTIONS}?amount[gte]=0&amount[lte]=100000`,
    '/v1/3ds?merchant_id=acq_alpha_m1&currency=SAR&items=100',
    '/v1/acquirer/merchants/acq_alpha_m1/users?sort[field]=email&sort[dir]=asc',
  ])('takes %j', (target) => {
    expect(takes(target)).toBe(true);
  });

  it.each([
    [`${AUDIT}?items=0`, 'below its minimum'],
    [`${AUDIT}?items=101`, 'above its maximum'],
    [`${AUDIT}?items=1000000000000000000000`, 'far above its maximum'],
    [`${AUDIT}?created_at[gte]=2026-11-01T00:00:00+03:00`, 'a raw + is a space once decoded'],
    [`${AUDIT}?created_at[gte]=2026-11-01T00:00:00`, 'a date-time without an offset'],
    [`${AUDIT}?created_at[gte]=2026-02-30`, 'no such day'],
    [`${AUDIT}?created_at[gte]=2026-11-01T24:00:00Z`, 'no such hour'],
    [`${AUDIT}?created_at[gt]=2026-11-01`, 'a bracketed name not declared'],
    [`${AUDIT}?created_at=2026-11-01`, 'the name without its brackets'],
    [`${AUDIT}?created_at[gte]=2026-11-01&created_at%5Bgte%5D=2026-11-02`, 'the same name twice, once encoded'],
    [`${AUDIT}?sort[dir]=up`, 'a value outside the enumeration'],
    [`${AUDIT}?sort[dir]=ASC`, 'an enumeration is matched exactly'],
    [`${AUDIT}?performer_email=${'a'.repeat(250)}@x.io`, 'longer than its max_length'],
    [`${AUDIT}?performer_email=a%3Cb@x.io`, 'a character outside its alphabet, encoded'],
    [`${AUDIT}?action_type=%E2%80%AEcreate`, 'a bidirectional override, encoded'],
    [`${AUDIT}?items=%3`, 'a stray percent sign'],
    [`${AUDIT}?items=%FF`, 'bytes that are not UTF-8'],
    [`${AUDIT}?acquirer_id=acq_beta`, 'undeclared'],
    [`${AUDIT}?acquirer%5Fid=acq_beta`, 'undeclared, encoded'],
    [`${TRANSACTIONS}?${Array.from({ length: 11 }, () => 'status[]=captured').join('&')}`, 'a repeatable parameter past its max_count'],
    [`${TRANSACTIONS}?status[]=captured&status=captured`, 'the repeatable name without its brackets'],
  ])('refuses %j (%s)', (target) => {
    expect(takes(target)).toBe(false);
  });

  it('takes a repeatable parameter up to its max_count', () => {
    expect(takes(`${TRANSACTIONS}?${Array.from({ length: 10 }, (_, i) => `status[]=s${i}`).join('&')}`)).toBe(true);
  });
});

describe('a name that decodes to a declared one is judged as that one, and no other', () => {
  const policy = () => withQuery('{ page: positive_integer, "sort[dir]": { type: enum, values: [asc, desc] } }');
  /** Any string with some characters written as %XX, as a client library might. */
  const encodedSomehow = (text: string) =>
    fc.array(fc.boolean(), { minLength: text.length, maxLength: text.length }).map((choices) =>
      [...text].map((c, i) => (choices[i] ? '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0') : c)).join(''),
    );

  it('takes every spelling of a declared name with a good value, and of a good value', () => {
    fc.assert(
      fc.property(encodedSomehow('sort[dir]'), encodedSomehow('desc'), (name, value) => {
        expect(takes(`/things?${name}=${value}`, policy())).toBe(true);
      }),
    );
  });

  it('refuses a declared name given twice in any two spellings', () => {
    fc.assert(
      fc.property(encodedSomehow('page'), encodedSomehow('page'), (first, second) => {
        expect(takes(`/things?${first}=1&${second}=2`, policy())).toBe(false);
      }),
    );
  });

  it('refuses every name that does not decode to a declared one', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_%[\]]{1,12}$/), (name) => {
        fc.pre(decodeComponent(name) !== 'page' && decodeComponent(name) !== 'sort[dir]');
        expect(takes(`/things?${name}=1`, policy())).toBe(false);
      }),
    );
  });
});

describe('decodeComponent', () => {
  it.each([
    ['plain', 'plain'],
    ['a+b', 'a b'],
    ['%2B03:00', '+03:00'],
    ['sort%5Bfield%5D', 'sort[field]'],
    ['%C3%A9', 'é'],
    ['%', null],
    ['%zz', null],
    ['%C3', null],
    ['%ED%A0%80', null], // an encoded surrogate is not UTF-8
  ])('%j → %j', (raw, decoded) => {
    expect(decodeComponent(raw)).toBe(decoded);
  });
});
