import fc from 'fast-check';
import { FORWARDED_REQUEST_HEADERS, HOP_BY_HOP, NEVER_FORWARDED } from '../../src/net/header-names.js';
import { buildUpstreamHeaders } from '../../src/proxy/request-headers.js';
import { matchRoute } from '../../src/policy/match-route.js';
import type { CompiledPolicy } from '../../src/policy/compile.js';
import { shippedPolicy, STATEMENT_ID } from '../helpers/policy.js';

/**
 * For any input, either the request is refused, or what the upstream would receive is exactly what
 * was judged. Generators lean towards the characters and spellings that break gateways.
 */
let policy: CompiledPolicy;
beforeAll(async () => {
  policy = await shippedPolicy();
});

const pieces = [
  '/', '//', '.', '..', '%', '%2f', '%2F', '%2e', '%2E', '%00', '\\', ';', '#', '?', '&', '=', ' ', '\t', '\u00e9', '\uff0e',
  'v1', 'acquirer', 'eod_statements', 'by_date', 'api_keys', 'permissions', '.csv', '.CSV', STATEMENT_ID, STATEMENT_ID.toUpperCase(),
  '2024-02-29', '2023-02-29', 'x', 'A', '0', '-', '_', '~', '*', 'http://evil', '@',
];
const target = fc.oneof(
  fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((parts) => parts.join('')),
  fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((parts) => '/v1/acquirer/eod_statements' + parts.join('')),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

describe('the path gate', () => {
  it('forwards a target only when it is exactly the canonical path that matched, plus its query', () => {
    let matched = 0;
    fc.assert(
      fc.property(target, fc.constantFrom('GET', 'POST', 'HEAD', 'get'), (raw, method) => {
        const match = matchRoute(policy, method, raw);
        if (match.kind !== 'matched') return true;
        matched++;
        expect(match.path + match.query).toBe(raw);
        expect(match.path).toMatch(/^(\/[A-Za-z0-9\-._~!$&'()*+,=:@]+)+$/);
        expect(match.path.split('/').some((s) => s === '.' || s === '..')).toBe(false);
        expect(match.path).not.toMatch(/[%\\;]/); // the query, passed unchanged, may hold encoded characters
        expect(raw).not.toMatch(/[#\s\u0000-\u001f\u007f-\uffff]/);
        expect(match.route.method).toBe(method);
        expect(match.route.template.regex.test(match.path)).toBe(true);
        return true;
      }),
      { numRuns: 5000 },
    );
    // The generators reach the routes often enough for the property to say something (a matcher
    // that refused everything would pass it vacuously).
    expect(matched).toBeGreaterThan(10); // about 46 in 5,000 runs
  });
});

const identitySpellings = ['x-acquirer-id', 'x_acquirer_id', 'x.acquirer.id', 'xacquirerid', 'x-acquirer_id', 'x-acquirer-id-', '-x-acquirer-id'];
const headerName = fc.oneof(
  fc.constantFrom(...identitySpellings, ...HOP_BY_HOP, ...NEVER_FORWARDED, 'accept', 'user-agent', 'x-custom', 'range', 'if-none-match'),
  // Every spelling a CGI-style server folds into one of the stripped names.
  fc.constantFrom(...HOP_BY_HOP, ...NEVER_FORWARDED, 'x-forwarded-ssl', 'x-original-host').chain((name) =>
    fc.array(fc.constantFrom('-', '_', '.', ''), { minLength: 8, maxLength: 8 }).map((seps) => name.split('-').reduce((out, part, i) => (i === 0 ? part : out + seps[i % 8] + part), '')),
  ),
  fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,15}$/),
);
const headers = fc.dictionary(headerName, fc.oneof(fc.string({ maxLength: 20 }), fc.array(fc.string({ maxLength: 10 }), { minLength: 2, maxLength: 3 })), { maxKeys: 12 });

describe('the header filter', () => {
  it('sends exactly one identity header, the key\'s, and nothing a client could use to steer the upstream', () => {
    fc.assert(
      fc.property(headers, fc.array(headerName, { maxLength: 4 }), (incoming, nominated) => {
        const withConnection = { ...incoming, connection: nominated.join(', ') };
        const out = buildUpstreamHeaders(withConnection, 'x-acquirer-id', 'acq_1', 'req-1');
        const fold = (n: string) => n.replace(/[-_.]/g, '').toLowerCase();
        const identity = Object.keys(out).filter((n) => fold(n) === fold('x-acquirer-id'));
        expect(identity).toEqual(['x-acquirer-id']);
        expect(out['x-acquirer-id']).toBe('acq_1');
        const stripped = [...HOP_BY_HOP, ...NEVER_FORWARDED].map(fold);
        for (const name of Object.keys(out)) {
          expect([...FORWARDED_REQUEST_HEADERS, 'x-acquirer-id', 'x-request-id']).toContain(name);
          expect(stripped).not.toContain(fold(name));
          expect(fold(name)).not.toMatch(/^x(forwarded|original|envoy)/);
          if (name !== 'x-acquirer-id' && name !== 'x-request-id') {
            expect(nominated.map((n) => n.trim().toLowerCase())).not.toContain(name);
            expect(out[name]).toEqual((withConnection as Record<string, unknown>)[name]);
          }
        }
        return true;
      }),
      { numRuns: 3000 },
    );
  });
});
