import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { formatPolicyError, loadPolicy, MAX_POLICY_BYTES, parsePolicy } from '../../../src/policy/load.js';
import { shippedPolicy } from '../../helpers/policy.js';

const fixture = (name: string) => `test/fixtures/policies/${name}.yaml`;

/** The error lines for a policy of one permission, things_read, and the routes given (YAML list items). */
function inlineErrors(routes: string): string[] {
  const result = parsePolicy(`version: 1
acquirer_header: X-Tenant
permissions:
  - { name: things_read, description: Read things }
routes:
${routes}`, 'inline.yaml');
  if (result.ok) throw new Error('the inline policy was accepted');
  return result.errors.map(formatPolicyError);
}

async function errorLines(name: string): Promise<string[]> {
  const result = await loadPolicy(fixture(name));
  if (result.ok) throw new Error(`${name} was accepted`);
  return result.errors.map(formatPolicyError);
}

describe('the shipped policy', () => {
  it('declares the catalogue, every route of the routes document, the header and the tenant fields', async () => {
    const policy = await shippedPolicy();
    expect(policy.acquirerHeader).toBe('x-acquirer-id');
    expect([...policy.tenantFields]).toEqual(['acquirer_id', 'acquirer']);
    expect(policy.routes.slice(0, 4).map((r) => [r.method, r.path, r.permissions, r.serve])).toEqual([
      ['GET', '/v1/acquirer/eod_statements', ['eod_list', 'eod_read'], undefined],
      ['GET', '/v1/acquirer/eod_statements/:statement_id.csv', ['eod_list', 'eod_read'], undefined],
      ['GET', '/v1/acquirer/eod_statements/by_date/:date.csv', ['eod_list', 'eod_read'], undefined],
      ['GET', '/v1/acquirer/api_keys/permissions', [], 'permission_catalogue'],
    ]);
    // The four of the statements, and the 37 routes of the live API's documentation (docs/api.md, "The rest of the API").
    expect(policy.routes).toHaveLength(41);
    // Every permission of the catalogue guards a route now.
    expect(new Set(policy.routes.flatMap((r) => r.permissions))).toEqual(policy.permissionNames);
    // A body only where a client sends one, and JSON only.
    expect(policy.routes.filter((r) => r.body !== undefined).map((r) => `${r.method} ${r.id}`)).toEqual([
      'POST merchants_create', 'PUT merchant_update', 'POST merchant_users_create', 'PUT merchant_user_update',
      'POST merchant_payment_control_create', 'PUT merchant_payment_control_update', 'POST payment_control_create', 'PUT payment_control_update',
    ]);
    expect([...policy.permissionNames]).toEqual([
      'merchants_create', 'merchants_read', 'merchants_update', 'merchants_delete',
      'merchant_users_create', 'merchant_users_read', 'merchant_users_update', 'merchant_users_disable',
      'merchant_users_enable', 'merchant_users_password_reset', 'orders_read', '3ds_read',
      'agreements_read', 'agreements_disable', 'payment_controls_create', 'payment_controls_read',
      'payment_controls_update', 'payment_controls_delete', 'eod_list', 'eod_read', 'audit_logs_read',
    ]);
    expect(Object.fromEntries(policy.upstreamStatusMap)).toEqual({ 401: 502, 403: 404, 404: 404 });
    expect(policy.contentHash).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('refusing a bad policy with file, line, column and reason', () => {
  it.each([
    ['a body on a GET route', "  - { id: things, method: GET, path: /v1/things, body: { content_types: [application/json], max_bytes: 10 }, permissions: [things_read] }", 'inline.yaml:6:56: routes.0.body: a GET request has no body the upstream would read (RFC 9110 §9.3.1): declare none'],
    ['a media type the gateway does not check', "  - { id: things, method: POST, path: /v1/things, body: { content_types: [text/csv], max_bytes: 10 }, permissions: [things_read] }", 'inline.yaml:6:75: routes.0.body.content_types.0: the gateway checks JSON bodies only: application/json or application/<name>+json, lower case'],
    ['no max_bytes', "  - { id: things, method: POST, path: /v1/things, body: { content_types: [application/json] }, permissions: [things_read] }", 'inline.yaml:6:57: routes.0.body.max_bytes is required'],
    ['max_count on a path parameter', "  - { id: things, method: GET, path: /v1/things/:kind, params: { kind: { type: enum, values: [a], max_count: 2 } }, permissions: [things_read] }", 'inline.yaml:6:72: routes.0.params.kind: a path parameter is given once: max_count is for query parameters'],
    ['bounds on a uuid', "  - { id: things, method: GET, path: /v1/things, query: { id: { type: uuid, min: 1 } }, permissions: [things_read] }", 'inline.yaml:6:63: routes.0.query.id: min and max bound an integer or positive_integer only'],
    ['min above max', "  - { id: things, method: GET, path: /v1/things, query: { items: { type: integer, min: 5, max: 1 } }, permissions: [things_read] }", 'inline.yaml:6:66: routes.0.query.items: min is above max'],
    ['an enumeration value twice', "  - { id: things, method: GET, path: /v1/things, query: { dir: { type: enum, values: [asc, asc] } }, permissions: [things_read] }", 'inline.yaml:6:86: routes.0.query.dir.values: values are listed once each'],
    ['an unknown alphabet', "  - { id: things, method: GET, path: /v1/things, query: { e: { type: string, alphabet: any, max_length: 3 } }, permissions: [things_read] }", 'inline.yaml:6:88: routes.0.query.e.alphabet: Invalid option: expected one of "token"|"dotted"|"email"'],
    ['a bracketed name with a space', "  - { id: things, method: GET, path: /v1/things, query: { \"sort[a b]\": uuid }, permissions: [things_read] }", 'inline.yaml:6:72: routes.0.query.sort[a b]: a query parameter name is a letter, then up to 63 letters, digits, _ . or -, then up to two [parts] of letters, digits and _'],
  ])('%s', (_, route, line) => {
    expect(inlineErrors(route + '\n')).toEqual([line]);
  });


  it('accepts a minimal valid policy', async () => {
    const result = await loadPolicy(fixture('minimal'));
    expect(result.ok).toBe(true);
  });

  it.each([
    ['empty', ''],
    ['only comments', '# the policy goes here\n\n# later\n'],
    ['only a document marker', '---\n'],
  ])('a file with no policy in it (%s)', (_, source) => {
    const result = parsePolicy(source, 'p.yaml');
    expect(result.ok ? [] : result.errors.map(formatPolicyError)).toEqual(['p.yaml:1:1: no policy in the file: it is empty, or holds only comments']);
  });

  it('unknown permission', async () => {
    expect(await errorLines('unknown-permission')).toEqual([
      `${fixture('unknown-permission')}:9:32: routes.0.permissions.1: unknown permission "things_write" (not in the catalogue)`,
    ]);
  });

  it('unknown field', async () => {
    expect(await errorLines('unknown-field')).toEqual([`${fixture('unknown-field')}:10:5: routes.0.cache: unknown field "cache"`]);
  });

  it('every unknown field of a mapping, each at its own line', () => {
    expect(inlineErrors(`  - id: things
    method: GET
    path: /v1/things
    permissions: [things_read]
    cache: 60
    retries: 2`)).toEqual(['inline.yaml:10:5: routes.0.cache: unknown field "cache"', 'inline.yaml:11:5: routes.0.retries: unknown field "retries"']);
  });

  it('bad templates', async () => {
    expect(await errorLines('bad-template')).toEqual([
      `${fixture('bad-template')}:8:11: routes.0.path: bad path template: segment ".." is a dot segment`,
      `${fixture('bad-template')}:13:11: routes.1.path: bad path template: parameter :id has no type in params`,
    ]);
  });

  it('duplicate and ambiguous routes, per method', async () => {
    expect(await errorLines('ambiguous')).toEqual([
      `${fixture('ambiguous')}:13:11: routes.1.path: GET /v1/things/:name is ambiguous with route "by_id" (routes.0): both match /v1/things/00000000-0000-0000-0000-000000000000`,
      `${fixture('ambiguous')}:18:11: routes.2.path: GET /v1/things/latest is ambiguous with route "by_name" (routes.1): both match /v1/things/latest`,
      `${fixture('ambiguous')}:22:11: routes.3.path: GET /v1/things/:thing is ambiguous with route "by_id" (routes.0): both match /v1/things/00000000-0000-0000-0000-000000000000`,
      `${fixture('ambiguous')}:22:11: routes.3.path: GET /v1/things/:thing is ambiguous with route "by_name" (routes.1): both match /v1/things/00000000-0000-0000-0000-000000000000`,
    ]);
  });

  it('invalid YAML', async () => {
    const [line, ...rest] = await errorLines('invalid-yaml');
    expect(line).toMatch(/^test\/fixtures\/policies\/invalid-yaml\.yaml:\d+:\d+: invalid YAML: /);
    expect(rest.every((l) => l.includes('invalid YAML'))).toBe(true);
  });

  it('values of the wrong kind, each reported', async () => {
    const lines = await errorLines('bad-values');
    expect(lines).toEqual([
      `${fixture('bad-values')}:1:10: version: Invalid input: expected 1`,
      `${fixture('bad-values')}:6:13: permissions.0.name: must be of the form <group>_<action> (lower case, digits, underscores)`,
      `${fixture('bad-values')}:9:13: routes.0.method: Invalid option: expected one of "GET"|"HEAD"|"POST"|"PUT"|"PATCH"|"DELETE"`,
    ]);
  });

  describe('a status map under which another acquirer\'s resource would not look like a missing one', () => {
    const withMap = (map: string) =>
      parsePolicy(`version: 1
acquirer_header: X-Tenant
${map}
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }
`, 'inline.yaml');
    const errors = (map: string) => {
      const result = withMap(map);
      return result.ok ? [] : result.errors.map(formatPolicyError);
    };
    const refusal = (at: string, for403: number, for404: number) =>
      `inline.yaml:${at}: upstream_status_map: an upstream 403 (another acquirer's resource) would be answered ${for403} and a 404 (none) ${for404}: ` +
      'a resource of another acquirer must look exactly like one that does not exist; map both to one status (403: 404, 404: 404)';

    // Located at the map's first entry (or its `{}`).
    it.each([
      ['upstream_status_map:\n  403: 403\n  404: 404', '4:3', 403, 404],
      ['upstream_status_map:\n  403: 404\n  404: 400', '4:3', 404, 400],
      ['upstream_status_map:\n  500: 502', '4:3', 403, 404], // neither mapped: each keeps its status
      ['upstream_status_map: {}', '3:22', 403, 404],
    ])('%j is refused', (map, at, for403, for404) => {
      expect(errors(map)).toEqual([refusal(at, for403, for404)]);
    });

    it.each([
      'upstream_status_map:\n  403: 404\n  404: 404\n  500: 502',
      'upstream_status_map:\n  403: 400\n  404: 400',
      '# none: the default maps both to 404',
    ])('%j is accepted', (map) => {
      expect(errors(map)).toEqual([]);
      const result = withMap(map);
      const answers = result.ok ? [result.policy.upstreamStatusMap.get(403), result.policy.upstreamStatusMap.get(404)] : [];
      expect(answers[0]).toBe(answers[1]);
    });
  });

  it('a status map that would answer an upstream status with 401, or an upstream 401 with anything but 502', () => {
    const result = parsePolicy(
      `version: 1
acquirer_header: X-Tenant
upstream_status_map:
  500: 401
  401: 503
  403: 404
  404: 404
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }
`,
      'inline.yaml',
    );
    expect(!result.ok && result.errors.map(formatPolicyError)).toEqual([
      "inline.yaml:5:8: upstream_status_map.401: an upstream 401 is always answered 502 (it is about the gateway's own standing upstream, never the client's key)",
      "inline.yaml:4:8: upstream_status_map.500: 401 tells a client its own key is invalid, and the upstream never sees the client's key: map an upstream status to 502 instead",
    ]);
  });

  it('two map keys that print alike, as 403 and "403" in the status map (the later would win)', () => {
    const result = parsePolicy(
      `version: 1
acquirer_header: X-Tenant
upstream_status_map:
  403: 404
  "403": 403
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }
`,
      'inline.yaml',
    );
    expect(!result.ok && result.errors.map(formatPolicyError)).toEqual(['inline.yaml:5:3: invalid YAML: Map keys must be unique']);
  });

  it('keys YAML would read as something other than the text they show, and YAML 1.1', () => {
    expect(inlineErrors('  - { id: things, method: GET, path: /v1/things, query: { True: slug, .inf: slug, null: slug, "yes": slug }, permissions: [things_read] }\n')).toEqual([
      'inline.yaml:6:59: the key True is read as a boolean, not as text: quote it ("True")',
      'inline.yaml:6:71: the key .inf is read as a number, not as text: quote it (".inf")',
      'inline.yaml:6:83: the key null is read as null, not as text: quote it ("null")',
    ]);
    expect(inlineErrors('  - { id: things, method: GET, path: /v1/things, query: { __proto__: integer }, permissions: [things_read] }\n')).toEqual([
      'inline.yaml:6:59: a key named __proto__ is not allowed',
    ]);
    const yaml11 = parsePolicy('%YAML 1.1\n---\nversion: 1\nacquirer_header: X-Tenant\nupstream_status_map: { 0770: 502, 403: 404, 404: 404 }\npermissions: [{ name: things_read, description: Read }]\nroutes: [{ id: things, method: GET, path: /v1/things, query: { on: slug }, permissions: [things_read] }]\n', 'inline.yaml');
    expect(!yaml11.ok && yaml11.errors.map(formatPolicyError)).toEqual(['inline.yaml:1:1: YAML 1.1 is not read: a policy is YAML 1.2 (leave the %YAML directive out)']);
    // A version the parser does not know is read as 1.2 with a warning: refused all the same.
    const yaml20 = parsePolicy('%YAML 2.0\n---\nversion: 1\n', 'inline.yaml');
    expect(!yaml20.ok && yaml20.errors.map(formatPolicyError)[0]).toMatch(/^inline\.yaml:1:\d+: invalid YAML: /);
    const withStatusMap = (map: string) =>
      parsePolicy(`version: 1\nacquirer_header: X-Tenant\nupstream_status_map: { ${map} }\npermissions: [{ name: things_read, description: Read }]\nroutes: [{ id: things, method: GET, path: /v1/things, permissions: [things_read] }]\n`, 'inline.yaml');
    const statusKeys = withStatusMap('abc: 502, 0x1F4: 502, 503.0: 502, 403: 404, 404: 404');
    expect(!statusKeys.ok && statusKeys.errors.map(formatPolicyError)).toEqual([
      'inline.yaml:3:24: abc: a status map key is a status code written in decimal digits',
      'inline.yaml:3:34: 0x1F4: a status map key is a status code written in decimal digits',
      'inline.yaml:3:46: 503.0: a status map key is a status code written in decimal digits',
    ]);
    // Quoted, as JSON writes every key: the same status.
    const quoted = withStatusMap('"403": 404, \'404\': 404');
    expect(quoted.ok && Object.fromEntries(quoted.policy.upstreamStatusMap)).toEqual({ 403: 404, 404: 404 });
    const tagged = parsePolicy('version: 1\nacquirer_header: X-Tenant\npermissions: [{ name: things_read, description: Read }]\nroutes: [{ id: things, method: GET, path: /v1/things, query: !!omap [page: positive_integer], permissions: [things_read] }]\n', 'inline.yaml');
    expect(!tagged.ok && tagged.errors.map(formatPolicyError)).toEqual(['inline.yaml:4:69: YAML tags are not allowed (tag:yaml.org,2002:omap): write the value plainly']);
    // On a single value too, a key's included: the text would mean what it does not show.
    const taggedValues = parsePolicy(
      'version: !!int 1\nacquirer_header: X-Tenant\nupstream_status_map: { 403: !!int 404, !!str 404: 404 }\npermissions: [{ name: things_read, description: Read }]\nroutes: [{ id: things, method: !!str GET, path: /v1/things, permissions: [things_read] }]\n',
      'inline.yaml',
    );
    expect(!taggedValues.ok && taggedValues.errors.map(formatPolicyError)).toEqual([
      'inline.yaml:1:16: YAML tags are not allowed (tag:yaml.org,2002:int): write the value plainly',
      'inline.yaml:3:35: YAML tags are not allowed (tag:yaml.org,2002:int): write the value plainly',
      'inline.yaml:3:46: YAML tags are not allowed (tag:yaml.org,2002:str): write the value plainly',
      'inline.yaml:5:38: YAML tags are not allowed (tag:yaml.org,2002:str): write the value plainly',
    ]);
    const notErrors = parsePolicy('version: 1\nacquirer_header: X-Tenant\nupstream_status_map: { 200: 404, 403: 404, 404: 404 }\npermissions: [{ name: things_read, description: Read }]\nroutes: [{ id: things, method: GET, path: /v1/things, permissions: [things_read] }]\n', 'inline.yaml');
    expect(!notErrors.ok && notErrors.errors.map(formatPolicyError)).toEqual([
      'inline.yaml:3:29: upstream_status_map.200: 200 is not an upstream error status: a key is an HTTP status from 400 to 599',
    ]);
  });

  it('a key, or its random part alone, anywhere in it: refused, and never quoted back', () => {
    const body = 'RbIL7GCn_NE2Al9PxbJ18r6w5rAagZSkraEvZDALRNw';
    const described = parsePolicy(`version: 1\nacquirer_header: X-Tenant\npermissions: [{ name: things_read, description: "see acquirer_key_${body}" }]\nroutes: [{ id: things, method: GET, path: /v1/things, permissions: [things_read] }]\n`, 'inline.yaml');
    expect(!described.ok && described.errors.map(formatPolicyError)).toEqual(['inline.yaml:3:49: this holds what is shaped like an API key or its random part: a policy holds none']);
    const aliased = parsePolicy(`version: 1\nacquirer_header: X-Tenant\npermissions: [{ name: things_read, description: *${body} }]\n`, 'inline.yaml');
    const lines = !aliased.ok ? aliased.errors.map(formatPolicyError) : [];
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).not.toContain(body);
  });

  it('a path parameter named like a property every object has, without a type of its own', () => {
    expect(inlineErrors('  - { id: things, method: GET, path: /v1/things/:constructor, permissions: [things_read] }\n')).toEqual([
      'inline.yaml:6:38: routes.0.path: bad path template: parameter :constructor has no type in params',
    ]);
  });

  it('the route id the metrics give requests no route matched', () => {
    expect(inlineErrors('  - { id: unmatched, method: GET, path: /v1/things, permissions: [things_read] }\n')).toEqual([
      `inline.yaml:6:11: routes.0.id: "unmatched" is the metrics' name for requests no route matched: choose another id`,
    ]);
  });

  it('two routes too complex to compare: refused with both named, not a crash', () => {
    const segments = (p: string) => Array.from({ length: 40 }, (_, i) => `:${p}${i}`).join('/');
    const params = (p: string) => `{ ${Array.from({ length: 40 }, (_, i) => `${p}${i}: slug`).join(', ')} }`;
    const errors = inlineErrors(
      `  - { id: a, method: GET, path: /v1/${segments('a')}, params: ${params('a')}, permissions: [things_read] }\n` +
        `  - { id: b, method: GET, path: /v1/${segments('b')}.x, params: ${params('b')}, permissions: [things_read] }\n`,
    );
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^inline\.yaml:7:33: routes\.1\.path: GET \/v1\/:b0\/.* is too complex to compare with route "a" \(routes\.0\): /);
  });

  it('YAML aliases, each named where it is used, also on a reload (no unexpected error)', () => {
    const result = inlineErrors(`  - { id: things, method: GET, path: /v1/things, permissions: &both [things_read] }
  - { id: other, method: GET, path: /v1/other, permissions: *both }
`);
    expect(result).toEqual(['inline.yaml:7:61: YAML aliases are not allowed (*both): write the value out']);
  });

  it('query declarations: names and types checked like params', () => {
    const result = inlineErrors(`  - id: things
    method: GET
    path: /v1/things
    query: { "page[number]": integer, size: number }
    permissions: [things_read]
`);
    expect(result).toEqual([
      'inline.yaml:9:45: routes.0.query.size: a type (uuid, date, date_time, date_or_date_time, integer, positive_integer, boolean, merchant_id, slug), or { type: integer, min, max }, { type: enum, values: […] }, { type: string, alphabet, max_length }',
    ]);
  });

  it('a missing field, or one of the wrong kind, said in words', () => {
    expect(inlineErrors(`  - id: things
    method: GET
    path: /v1/things
  - id: other
    method: GET
    path: /v1/other
    permissions: things_read
    serve: [permission_catalogue]
`)).toEqual([
      'inline.yaml:6:5: routes.0.permissions is required',
      'inline.yaml:12:18: routes.1.permissions: must be a list, not text',
      'inline.yaml:13:12: routes.1.serve: Invalid input: expected "permission_catalogue"',
    ]);
    const empty = parsePolicy('version: 1\nacquirer_header: X-Tenant\npermissions: []\nroutes: []\n', 'empty.yaml');
    expect(empty.ok ? [] : empty.errors.map(formatPolicyError)).toEqual(['empty.yaml:3:14: permissions: must list at least 1', 'empty.yaml:4:9: routes: must list at least 1']);
  });

  it('a query that is neither a mapping of parameters nor `any`', () => {
    const result = inlineErrors(`  - id: things
    method: GET
    path: /v1/things
    query: anything
    permissions: [things_read]
`);
    expect(result).toEqual(['inline.yaml:9:12: routes.0.query: the query parameters the route takes, each with its type (`{ page: positive_integer }`), `{}` for none, or `any`']);
  });

  it('query parameter names that are not a plain name with up to two bracketed parts', () => {
    const result = inlineErrors(`  - { id: things, method: GET, path: /v1/things, query: { "page[number]": integer, "": slug, "a[b][c][d]": slug, "a%5Bb%5D": slug }, permissions: [things_read] }
`);
    const reason = 'a query parameter name is a letter, then up to 63 letters, digits, _ . or -, then up to two [parts] of letters, digits and _';
    expect(result).toEqual([`inline.yaml:6:88: routes.0.query.: ${reason}`, `inline.yaml:6:108: routes.0.query.a[b][c][d]: ${reason}`, `inline.yaml:6:126: routes.0.query.a%5Bb%5D: ${reason}`]);
  });

  it('a missing file', async () => {
    expect(await errorLines('does-not-exist')).toEqual([`${fixture('does-not-exist')}:0:0: cannot read policy: file not found`]);
  });

  describe('files that are not read', () => {
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(path.join(tmpdir(), 'policy-'))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));
    const linesOf = async (file: string, options?: { pipeWaitMs?: number }) => {
      const result = await loadPolicy(file, options);
      return result.ok ? [] : result.errors.map(formatPolicyError);
    };

    it('one larger than MAX_POLICY_BYTES, refused before it is parsed', async () => {
      const file = path.join(dir, 'big.yaml');
      const shipped = readFileSync('policies/acquirer-api.yaml', 'utf8');
      writeFileSync(file, shipped + '#'.repeat(MAX_POLICY_BYTES - Buffer.byteLength(shipped)));
      expect(await linesOf(file)).toEqual([]); // at the limit: read
      writeFileSync(file, shipped + '#'.repeat(MAX_POLICY_BYTES - Buffer.byteLength(shipped) + 1));
      expect(await linesOf(file)).toEqual([`${file}:0:0: policy file too large: ${MAX_POLICY_BYTES + 1} bytes, at most ${MAX_POLICY_BYTES}`]);
    });

    it('none of these: the shipped policy written as JSON (every key quoted) is the same policy', async () => {
      const file = path.join(dir, 'policy.json');
      const yaml = await loadPolicy('policies/acquirer-api.yaml');
      const { parse } = await import('yaml');
      writeFileSync(file, JSON.stringify(parse(readFileSync('policies/acquirer-api.yaml', 'utf8')), null, 2));
      const json = await loadPolicy(file);
      expect(json.ok && yaml.ok).toBe(true);
      if (json.ok && yaml.ok) {
        expect(Object.fromEntries(json.policy.upstreamStatusMap)).toEqual(Object.fromEntries(yaml.policy.upstreamStatusMap));
        expect(json.policy.routes.map((r) => r.id)).toEqual(yaml.policy.routes.map((r) => r.id));
      }
    });

    it('a directory', async () => {
      expect(await linesOf(dir)).toEqual([`${dir}:0:0: cannot read policy: a directory, not a file`]);
    });

    it('one that is not UTF-8: decoded anyway, a byte would become another character than the file holds', async () => {
      const file = path.join(dir, 'latin1.yaml');
      const shipped = readFileSync('policies/acquirer-api.yaml', 'utf8');
      // A U+FFFD of its own on the first line, which is UTF-8: the line named is the one that is not.
      writeFileSync(file, Buffer.concat([Buffer.from(`# \uFFFD\n${shipped}# caf`), Buffer.from([0xe9]), Buffer.from('\n')]));
      const line = shipped.split('\n').length + 1;
      expect(await linesOf(file)).toEqual([`${file}:${line}:0: not UTF-8 text: a policy file is UTF-8`]);
    });

    it('a pipe of more than MAX_POLICY_BYTES (no size to ask for: counted as it is read)', async () => {
      const fifo = path.join(dir, 'fifo.yaml');
      execFileSync('mkfifo', [fifo]);
      const writing = (async () => {
        const writer = await fs.promises.open(fifo, 'w');
        await writer.write(Buffer.alloc(MAX_POLICY_BYTES + 10, '#')).catch(() => undefined); // the reader may close first
        await writer.close();
      })();
      expect(await linesOf(fifo)).toEqual([`${fifo}:0:0: policy file too large: more than ${MAX_POLICY_BYTES} bytes`]);
      await writing;
    });

    it('a named pipe whose writer comes after the read began: read to the writer\'s end', async () => {
      const fifo = path.join(dir, 'later.yaml');
      execFileSync('mkfifo', [fifo]);
      const shipped = readFileSync('policies/acquirer-api.yaml', 'utf8');
      const loading = loadPolicy(fifo, { pipeWaitMs: 60_000 });
      // Opening the write end waits for the reader: once it returns, the read has begun.
      const writer = await fs.promises.open(fifo, 'w');
      await writer.write(shipped.slice(0, 100));
      await writer.write(shipped.slice(100));
      await writer.close();
      const result = await loading;
      expect(result.ok && result.source).toBe(shipped);
    });

    it('a named pipe nobody writes, read with a wait: refused once the wait is over', async () => {
      const fifo = path.join(dir, 'unwritten.yaml');
      execFileSync('mkfifo', [fifo]);
      expect(await linesOf(fifo, { pipeWaitMs: 50 })).toEqual([`${fifo}:0:0: cannot read policy: a named pipe that nothing wrote to its end within 0.05 s`]);
    });

    it('a character device: read where the read may wait (start-up, the CLI), refused where it must end in time (a reload)', async () => {
      expect(await linesOf('/dev/null')).toEqual(['/dev/null:1:1: no policy in the file: it is empty, or holds only comments']);
      expect(await linesOf('/dev/null', { pipeWaitMs: 50 })).toEqual(['/dev/null:0:0: cannot read policy: a character device (a terminal?): read only at start-up and by the CLI']);
    });

    it('reads waiting on a named pipe hold no thread of libuv\'s pool', async () => {
      const fifo = path.join(dir, 'waited-on.yaml');
      execFileSync('mkfifo', [fifo]);
      // More reads than the pool has threads (4): if each held one, the file read below would never run.
      let settled = 0;
      const waiting = Array.from({ length: 6 }, () => loadPolicy(fifo, { pipeWaitMs: 60_000 }).finally(() => settled++));
      expect(await fs.promises.readFile('policies/acquirer-api.yaml', 'utf8')).toBe(readFileSync('policies/acquirer-api.yaml', 'utf8'));
      expect(settled).toBe(0);
      // A writer that closes without writing ends every read: an empty policy, refused.
      await (await fs.promises.open(fifo, 'w')).close();
      for (const result of await Promise.all(waiting)) expect(result.ok).toBe(false);
    });
  });
});

describe('the identity header', () => {
  const policyWith = (header: string) => `version: 1
acquirer_header: ${header}
permissions:
  - { name: things_read, description: Read things }
routes:
  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }
`;

  it.each(['Authorization', 'Host', 'Expect', 'Connection', 'X-Forwarded-Port', 'X-Forwarded-For', 'X-Client-IP', 'Max-Forwards', 'Content-Length', 'X-Request-Id', 'Proxy-Authorization', 'X-Forwarded-Ssl', 'X-Original-Host', 'Proxy', 'True-Client-IP', 'Accept', 'Range', 'Traceparent', 'X-Acquirer-Gateway-Exchange'])(
    'cannot be %s, a header the gateway controls, strips or passes from the client',
    async (header) => {
      const { parsePolicy } = await import('../../../src/policy/load.js');
      const result = parsePolicy(policyWith(header), 'inline.yaml');
      expect(result.ok).toBe(false);
      expect(!result.ok && result.errors.map(formatPolicyError)).toEqual([
        `inline.yaml:2:18: acquirer_header: "${header}" is a header the gateway controls; choose another`,
      ]);
    },
  );
});
