import { readFileSync } from 'node:fs';
import { loadPolicyOrThrow, parsePolicy } from '../../../src/policy/load.js';
import { diffPolicies, routeTable } from '../../../src/policy/diff.js';

const OLD = 'test/fixtures/policies/diff/old.yaml';
const NEW = 'test/fixtures/policies/diff/new.yaml';

describe('diffPolicies', () => {
  it('tells a reviewer what changed, flagging what loosens access', async () => {
    const markdown = diffPolicies((await loadPolicyOrThrow(OLD)).policy, (await loadPolicyOrThrow(NEW)).policy, OLD, NEW);
    expect(markdown).toBe(
      [
        `## Policy changes: \`${OLD}\` → \`${NEW}\``,
        '',
        '### Routes added (new access)',
        '',
        '- ⚠️ `GET /v1/acquirer/audit_logs` (`audit_logs`): requires `audit_logs_read`, query `none`, body `none`',
        '',
        '### Routes removed',
        '',
        '- `GET /v1/acquirer/orders` (`orders`): requires `orders_read`, query `none`, body `none`',
        '',
        '### Routes changed',
        '',
        '- `GET /v1/acquirer/eod_statements`: **removed `eod_read`: loosens access**',
        '- `GET /v1/acquirer/eod_statements/:id.csv`: added `audit_logs_read` (tightens access); renamed `eod_download` → `eod_statement_download` (metrics and logs change); ⚠️ parameter :id is now `slug` (was `uuid`): review what it lets through',
        '',
        '### Permission catalogue',
        '',
        '- `eod_list`: description "List statements" → "List End-of-Day statements"',
        '- added `audit_logs_read`: "Query the audit trail"',
        '- removed `orders_read` (keys that carry it keep it, but it grants nothing)',
        '',
        '### Upstream',
        '',
        '- ⚠️ acquirer header `x-acquirer-id` → `x-tenant-id` (the upstream must read the new one)',
        '- an upstream 500 is answered 502 (was 500)',
        '',
      ].join('\n'),
    );
  });

  it('says so when nothing that matters changed', async () => {
    const policy = (await loadPolicyOrThrow(OLD)).policy;
    expect(diffPolicies(policy, policy, OLD, OLD)).toBe(
      `## Policy changes: \`${OLD}\` → \`${OLD}\`\n\nNo changes that affect access, routing or the upstream.\n`,
    );
  });
});

describe('bodies, queries and tenant fields in a diff', () => {
  /** A policy of two routes, with the route lines given. */
  const policyOf = (tenantFields: string, postRoute: string, getQuery: string) => {
    const result = parsePolicy(
      `version: 1
acquirer_header: X-Tenant
tenant_fields: ${tenantFields}
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things_create, method: POST, path: /v1/things, permissions: [things_read], ${postRoute} }
  - { id: things_list, method: GET, path: /v1/things, permissions: [things_read], query: ${getQuery} }
`,
      'p.yaml',
    );
    if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
    return result.policy;
  };
  const JSON_4K = 'body: { content_types: [application/json], max_bytes: 4096 }';

  it.each([
    ['a body where there was none', 'query: {}', JSON_4K, '**now takes a body, `application/json ≤ 4096 bytes`: loosens what reaches the upstream**'],
    ['a raised max_bytes', JSON_4K, 'body: { content_types: [application/json], max_bytes: 8192 }', '**max_bytes raised 4096 → 8192: loosens what reaches the upstream**'],
    ['a newly accepted media type', JSON_4K, 'body: { content_types: [application/json, application/merge-patch+json], max_bytes: 4096 }', '**now accepts `application/merge-patch+json`: loosens what reaches the upstream**'],
    ['a lowered max_bytes', JSON_4K, 'body: { content_types: [application/json], max_bytes: 1024 }', 'max_bytes lowered 4096 → 1024 (tightens)'],
  ])('%s', (_, before, after, note) => {
    const markdown = diffPolicies(policyOf('[acquirer_id]', before, '{}'), policyOf('[acquirer_id]', after, '{}'), 'a', 'b');
    expect(markdown).toContain(`- \`POST /v1/things\`: ${note}`);
  });

  it("flags an upstream 422 left to pass with its own JSON body as loosening", () => {
    const mapped = (map: string) => {
      const result = parsePolicy(`version: 1\nacquirer_header: X-Tenant\nupstream_status_map: ${map}\npermissions:\n  - { name: things_read, description: Read things }\nroutes:\n  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }\n`, 'p.yaml');
      if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
      return result.policy;
    };
    const markdown = diffPolicies(mapped('{ 403: 404, 404: 404, 422: 502 }'), mapped('{ 403: 404, 404: 404 }'), 'a', 'b');
    expect(markdown).toContain('- **an upstream 422 is answered with its own JSON body (was 502): loosens what reaches clients**');
    expect(diffPolicies(mapped('{ 403: 404, 404: 404 }'), mapped('{ 403: 404, 404: 404, 422: 502 }'), 'a', 'b')).toContain('- an upstream 422 is answered 502 (was with its own JSON body)');
  });

  it('flags a removed tenant field as loosening, an added one as tightening', () => {
    const markdown = diffPolicies(policyOf('[acquirer_id, acquirer]', JSON_4K, '{}'), policyOf('[acquirer_id, tenant]', JSON_4K, '{}'), 'a', 'b');
    expect(markdown).toContain('### Tenant fields\n\n- **removed tenant field `acquirer`: a body may now name the tenant so, loosens access**\n- added tenant field `tenant` (tightens)');
  });

  it.each([
    ['{ items: { type: integer, min: 1, max: 100 } }', '{ items: { type: integer, min: 1, max: 1000 } }', true],
    ['{ items: { type: integer, min: 1, max: 100 } }', '{ items: { type: integer, min: 1, max: 50 } }', false],
    ['{ items: { type: integer, min: 1, max: 100 } }', '{ items: positive_integer }', true],
    ['{ items: positive_integer }', '{ items: { type: integer, min: 1, max: 50 } }', false],
    ['{ "sort[dir]": { type: enum, values: [asc] } }', '{ "sort[dir]": { type: enum, values: [asc, desc] } }', true],
    ['{ "sort[dir]": { type: enum, values: [asc, desc] } }', '{ "sort[dir]": { type: enum, values: [desc] } }', false],
    ['{ "status[]": { type: enum, values: [a], max_count: 2 } }', '{ "status[]": { type: enum, values: [a], max_count: 5 } }', true],
    ['{ e: { type: string, alphabet: token, max_length: 8 } }', '{ e: { type: string, alphabet: email, max_length: 8 } }', true],
    ['{ e: { type: string, alphabet: email, max_length: 8 } }', '{ e: { type: string, alphabet: token, max_length: 4 } }', false],
  ])('a query %s → %s loosens: %s', (before, after, loosens) => {
    const markdown = diffPolicies(policyOf('[acquirer_id]', JSON_4K, before), policyOf('[acquirer_id]', JSON_4K, after), 'a', 'b');
    const line = markdown.split('\n').find((l) => l.startsWith('- `GET /v1/things`'));
    expect(line).toBeDefined();
    expect(line!.includes('loosens what reaches the upstream')).toBe(loosens);
  });
});

describe('a description in a diff', () => {
  it('shows on one line, quoted, with no HTML of its own that could hide the rest of the review', () => {
    const withDescription = (description: string, header = 'X-Tenant') =>
      parsePolicy(
        `version: 1\nacquirer_header: ${header}\npermissions:\n  - { name: things_read, description: ${JSON.stringify(description)} }\nroutes:\n  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }\n`,
        'p.yaml',
      );
    const [a, b] = [withDescription('Read things'), withDescription('Read things\n<!-- & more', 'X-Other')];
    if (!a.ok || !b.ok) throw new Error('invalid test policy');
    const markdown = diffPolicies(a.policy, b.policy, 'a', 'b');
    expect(markdown).toContain('- `things_read`: description "Read things" → "Read things\\n&lt;!-- &amp; more"\n');
    expect(markdown).not.toContain('<!--');
    expect(markdown).toContain('- ⚠️ acquirer header `x-tenant` → `x-other`');
  });

  it('spells out characters that would change how the line shows without showing themselves', () => {
    const withDescription = (description: string) =>
      parsePolicy(
        `version: 1\nacquirer_header: X-Tenant\npermissions:\n  - { name: things_read, description: ${JSON.stringify(description)} }\nroutes:\n  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }\n`,
        'p.yaml',
      );
    // A right-to-left override, an isolate, a zero-width space, a byte-order mark, a line separator and a tag
    // character (outside the BMP: spelled as its two UTF-16 units, as JSON would).
    const [a, b] = [withDescription('Read things'), withDescription('Read \u202Eabc\u2066x\u2069\u200By\uFEFFz\u2028end\u{E0041}\u007F\u009B\u0085')];
    if (!a.ok || !b.ok) throw new Error('invalid test policy');
    const markdown = diffPolicies(a.policy, b.policy, 'a', 'b');
    expect(markdown).toContain('- `things_read`: description "Read things" → "Read \\u202eabc\\u2066x\\u2069\\u200by\\ufeffz\\u2028end\\udb40\\udc41\\u007f\\u009b\\u0085"\n');
    expect(markdown).not.toMatch(/[\u202e\u2066\u2069\u200b\ufeff\u2028\u007f\u009b\u0085]|\u{E0041}/u);
  });
});

describe('a path parameter\'s type and the status map in a diff', () => {
  const policyWith = (type: string, map = '') =>
    parsePolicy(
      `version: 1
acquirer_header: X-Tenant
${map}permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: thing, method: GET, path: /v1/things/:id, params: { id: ${type} }, permissions: [things_read] }
`,
      'p.yaml',
    );
  const diff = (a: ReturnType<typeof policyWith>, b: ReturnType<typeof policyWith>) => {
    if (!a.ok || !b.ok) throw new Error('invalid test policy');
    return diffPolicies(a.policy, b.policy, 'a', 'b').split('\n').filter((l) => l.startsWith('- '));
  };

  it.each([
    ['slug', 'uuid', ['- `GET /v1/things/:id`: parameter :id is now `uuid` (was `slug`; narrower)']],
    ['integer', 'positive_integer', ['- `GET /v1/things/:id`: parameter :id is now `positive_integer` (was `integer`; narrower)']],
    ['uuid', 'slug', ['- `GET /v1/things/:id`: ⚠️ parameter :id is now `slug` (was `uuid`): review what it lets through']],
    ['uuid', 'integer', ['- `GET /v1/things/:id`: ⚠️ parameter :id is now `integer` (was `uuid`): review what it lets through']],
  ])('%s → %s', (from, to, lines) => {
    expect(diff(policyWith(from), policyWith(to))).toEqual(lines);
  });

  it('names what each upstream status is answered with, and leaves out entries that change no answer', () => {
    const none = policyWith('slug');
    const listed = policyWith('slug', 'upstream_status_map: { 401: 502, 403: 404, 404: 404, 500: 500 }\n');
    const mapped = policyWith('slug', 'upstream_status_map: { 403: 404, 404: 404, 500: 502 }\n');
    expect(diff(none, listed)).toEqual([]);
    expect(diff(none, mapped)).toEqual(['- an upstream 500 is answered 502 (was 500)']);
  });
});

describe('a route\'s query in a diff', () => {
  const policyWith = (query: string) =>
    parsePolicy(
      `version: 1
acquirer_header: X-Tenant
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read]${query} }
`,
      'p.yaml',
    );
  const change = (from: string, to: string) => {
    const [a, b] = [policyWith(from), policyWith(to)];
    if (!a.ok || !b.ok) throw new Error('invalid test policy');
    return diffPolicies(a.policy, b.policy, 'a', 'b').split('\n').find((l) => l.startsWith('- `GET /v1/things`')) ?? null;
  };

  it.each([
    [', query: {}', ', query: { page: integer }', '- `GET /v1/things`: **query `page: integer` (was `none`): loosens what reaches the upstream**'],
    [', query: { page: integer }', ', query: any', '- `GET /v1/things`: **query `any (unchecked)` (was `page: integer`): loosens what reaches the upstream**'],
    ['', ', query: any', '- `GET /v1/things`: **query `any (unchecked)` (was `none`): loosens what reaches the upstream**'],
    [', query: { page: integer }', '', '- `GET /v1/things`: query `none` (was `page: integer`)'],
    [', query: { page: integer }', ', query: { page: slug }', '- `GET /v1/things`: **query `page: slug` (was `page: integer`): loosens what reaches the upstream**'],
    [', query: { page: integer }', ', query: { page: positive_integer }', '- `GET /v1/things`: query `page: positive_integer` (was `page: integer`)'],
    [', query: { page: uuid }', ', query: { page: integer }', '- `GET /v1/things`: **query `page: integer` (was `page: uuid`): loosens what reaches the upstream**'],
    [', query: { page: integer, q: slug }', ', query: { page: integer }', '- `GET /v1/things`: query `page: integer` (was `page: integer, q: slug`)'],
    [', query: any', ', query: {}', '- `GET /v1/things`: query `none` (was `any (unchecked)`)'],
    ['', ', query: {}', null],
    [', query: { page: integer }', ', query: { page: integer }', null],
    [', query: { page: integer, q: slug }', ', query: { q: slug, page: integer }', null],
  ])('%j → %j', (from, to, line) => {
    expect(change(from, to)).toBe(line);
  });
});

describe('routeTable', () => {
  it('lists the effective routes of the shipped policy', async () => {
    const table = routeTable((await loadPolicyOrThrow('policies/acquirer-api.yaml')).policy);
    expect(table.split('\n').slice(2, 8)).toEqual([
      '| route | method | path | parameters | query | body | permissions (all required) | rate per key | answered by |',
      '|---|---|---|---|---|---|---|---|---|',
      '| `eod_statements_list` | GET | `/v1/acquirer/eod_statements` | – | page: positive_integer | none | `eod_list`, `eod_read` | – | upstream |',
      '| `eod_statement_download` | GET | `/v1/acquirer/eod_statements/:statement_id.csv` | statement_id: uuid | none | none | `eod_list`, `eod_read` | – | upstream |',
      '| `eod_statement_download_by_date` | GET | `/v1/acquirer/eod_statements/by_date/:date.csv` | date: date | none | none | `eod_list`, `eod_read` | – | upstream |',
      '| `api_keys_permissions` | GET | `/v1/acquirer/api_keys/permissions` | – | any (unchecked) | none | no permission (any valid key) | – | gateway |',
    ]);
  });
});

describe("a key's rate on a route in a diff", () => {
  const policyWith = (rates: string, route: string) =>
    parsePolicy(
      `version: 1
acquirer_header: X-Tenant
${rates}permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read]${route} }
`,
      'p.yaml',
    );
  const change = (from: [string, string], to: [string, string]) => {
    const [a, b] = [policyWith(...from), policyWith(...to)];
    if (!a.ok || !b.ok) throw new Error('invalid test policy');
    return diffPolicies(a.policy, b.policy, 'a', 'b').split('\n').find((l) => l.startsWith('- `GET /v1/things`')) ?? null;
  };
  const DEFAULT_10 = 'rate_limits: { default: { per_second: 10, burst: 20 } }\n';

  it.each([
    [['', ''], [DEFAULT_10, ''], '- `GET /v1/things`: rate per key `10/s, burst 20 (default)` (was `none`)'],
    [[DEFAULT_10, ''], ['', ''], '- `GET /v1/things`: **rate per key `none` (was `10/s, burst 20 (default)`): loosens what reaches the upstream**'],
    // Slower, but a budget of its own beside the default's: the key may now make both.
    [[DEFAULT_10, ''], [DEFAULT_10, ', rate_limit: { per_second: 1, burst: 2 }'], '- `GET /v1/things`: **rate per key `1/s, burst 2 (own)` (was `10/s, burst 20 (default)`): loosens what reaches the upstream**'],
    [[DEFAULT_10, ', rate_limit: { per_second: 20, burst: 40 }'], [DEFAULT_10, ''], '- `GET /v1/things`: rate per key `10/s, burst 20 (default)` (was `20/s, burst 40 (own)`)'],
    [[DEFAULT_10, ''], [DEFAULT_10.replace('burst: 20', 'burst: 40'), ''], '- `GET /v1/things`: **rate per key `10/s, burst 40 (default)` (was `10/s, burst 20 (default)`): loosens what reaches the upstream**'],
    [[DEFAULT_10, ''], [DEFAULT_10, ''], null],
  ] as const)('%j → %j', (from, to, line) => {
    expect(change(from as [string, string], to as [string, string])).toBe(line);
  });
});
