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
        '- ⚠️ `GET /v1/acquirer/audit_logs` (`audit_logs`): requires `audit_logs_read`, query `none`',
        '',
        '### Routes removed',
        '',
        '- `GET /v1/acquirer/orders` (`orders`): requires `orders_read`, query `none`',
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
      '| route | method | path | parameters | query | permissions (all required) | answered by |',
      '|---|---|---|---|---|---|---|',
      '| `eod_statements_list` | GET | `/v1/acquirer/eod_statements` | – | page: positive_integer | `eod_list`, `eod_read` | upstream |',
      '| `eod_statement_download` | GET | `/v1/acquirer/eod_statements/:statement_id.csv` | statement_id: uuid | none | `eod_list`, `eod_read` | upstream |',
      '| `eod_statement_download_by_date` | GET | `/v1/acquirer/eod_statements/by_date/:date.csv` | date: date | none | `eod_list`, `eod_read` | upstream |',
      '| `api_keys_permissions` | GET | `/v1/acquirer/api_keys/permissions` | – | any (unchecked) | no permission (any valid key) | gateway |',
    ]);
  });
});
