import type { CompiledPolicy } from '../../../src/policy/compile.js';
import { impactMarkdown, keyImpact, losesAccess, type KeyHolding } from '../../../src/policy/impact.js';
import { parsePolicy } from '../../../src/policy/load.js';
import { missingPermissions } from '../../../src/policy/route-access.js';

/** A policy of the given routes (`METHOD path: [permissions]`) over the catalogue p_a, p_b, p_c. */
function policy(routes: Record<string, string[]>, catalogue = ['p_a', 'p_b', 'p_c']): CompiledPolicy {
  const lines = Object.entries(routes).map(([route, permissions], i) => {
    const [method, path] = route.split(' ');
    return `  - { id: r${i}_${method!.toLowerCase()}, method: ${method}, path: ${path}, permissions: [${permissions.join(', ')}] }`;
  });
  const text = `version: 1
acquirer_header: X-Acquirer-Id
permissions:
${catalogue.map((name) => `  - { name: ${name}, description: "${name}" }`).join('\n')}
routes:
${lines.join('\n')}
`;
  const result = parsePolicy(text, 'inline.yaml');
  if (!result.ok) throw new Error(result.errors.map((e) => e.message).join('\n'));
  return result.policy;
}

const key = (id: string, acquirer: string, permissions: string[], disabled = false): KeyHolding => ({
  id,
  acquirer_id: acquirer,
  permissions,
  disabled_at: disabled ? '2026-01-01T00:00:00.000Z' : null,
});

const ids = (keys: readonly KeyHolding[]) => keys.map((k) => k.id);

describe('missingPermissions (the permissions step, explain and impact)', () => {
  it.each([
    [['p_a', 'p_b'], ['p_a', 'p_b'], []],
    [['p_a'], ['p_a', 'p_b'], ['p_b']],
    [[], ['p_a', 'p_b'], ['p_a', 'p_b']],
    [['p_c'], [], []],
  ])('a key with %j, a route requiring %j: missing %j', (granted, required, missing) => {
    expect(missingPermissions(new Set(granted), required)).toEqual(missing);
  });
});

describe('keyImpact', () => {
  const keys = [key('key_1', 'acq_1', ['p_a']), key('key_2', 'acq_1', ['p_a', 'p_b']), key('key_3', 'acq_2', ['p_a']), key('key_4', 'acq_2', ['p_a'], true)];

  it('a permission added to a route: the keys without it lose access, the disabled key is left out', () => {
    const impact = keyImpact(policy({ 'GET /x': ['p_a'] }), policy({ 'GET /x': ['p_a', 'p_b'] }), keys);
    expect(impact.routes.map((r) => [r.route, ids(r.lost), ids(r.gained)])).toEqual([['GET /x', ['key_1', 'key_3'], []]]);
    expect([impact.judged, impact.disabled, losesAccess(impact)]).toEqual([3, 1, true]);
  });

  it('a permission removed from a route: keys gain access, none loses', () => {
    const impact = keyImpact(policy({ 'GET /x': ['p_a', 'p_b'] }), policy({ 'GET /x': ['p_a'] }), keys);
    expect(impact.routes.map((r) => [r.route, ids(r.lost), ids(r.gained)])).toEqual([['GET /x', [], ['key_1', 'key_3']]]);
    expect(losesAccess(impact)).toBe(false);
  });

  it('a route added, one removed, one of another method on the same path: each judged on its own', () => {
    const impact = keyImpact(policy({ 'GET /x': ['p_a'], 'GET /gone': ['p_b'] }), policy({ 'GET /x': ['p_a'], 'POST /x': ['p_b'], 'GET /any': [] }), keys);
    expect(impact.routes.map((r) => [r.route, ids(r.lost), ids(r.gained)])).toEqual([
      ['GET /gone', ['key_2'], []],
      ['POST /x', [], ['key_2']],
      ['GET /any', [], ['key_1', 'key_2', 'key_3']],
    ]);
  });

  it('a route whose permissions are unchanged, or merely reordered, is no change', () => {
    expect(keyImpact(policy({ 'GET /x': ['p_a', 'p_b'] }), policy({ 'GET /x': ['p_b', 'p_a'] }), keys).routes).toEqual([]);
  });

  it("permissions keys carry that the new catalogue lacks, whether this change removed them or not", () => {
    const withZ = [...keys, key('key_5', 'acq_3', ['p_a', 'p_z'])];
    const impact = keyImpact(policy({ 'GET /x': ['p_a'] }, ['p_a', 'p_b', 'p_c']), policy({ 'GET /x': ['p_a'] }, ['p_a', 'p_c']), withZ);
    expect(impact.stale.map((s) => [s.name, s.removed, ids(s.keys)])).toEqual([
      ['p_b', true, ['key_2']],
      ['p_z', false, ['key_5']],
    ]);
  });
});

describe('impactMarkdown', () => {
  it('per route: the keys that lose and gain access grouped by acquirer, counts per acquirer, and the footer', () => {
    const keys = [key('key_1', 'acq_1', ['p_a']), key('key_2', 'acq_1', ['p_a']), key('key_3', 'acq_2', ['p_a']), key('key_4', 'acq_2', ['p_b']), key('key_5', 'acq_2', ['p_a'], true)];
    const impact = keyImpact(policy({ 'GET /x': ['p_a'], 'GET /y': ['p_a', 'p_b'] }), policy({ 'GET /x': ['p_b'], 'GET /y': ['p_a', 'p_b'] }, ['p_a', 'p_b']), keys);
    expect(impactMarkdown(impact, 'old.yaml', 'new.yaml')).toBe(`## Key access: \`old.yaml\` → \`new.yaml\`

⚠️ **3 keys lose access** (to 1 route); 1 key gains access (to 1 route); 4 keys judged.

| acquirer | keys that lose access | keys that gain access |
|---|---|---|
| \`acq_1\` | 2 | 0 |
| \`acq_2\` | 1 | 1 |

### \`GET /x\` (route \`r0_get\`)

Requires \`p_b\` (was \`p_a\`).

- ⚠️ **loses access: 3 keys**: \`acq_1\` (2): \`key_1\`, \`key_2\`; \`acq_2\` (1): \`key_3\`
- gains access: 1 key: \`acq_2\` (1): \`key_4\`

---

5 keys read from Redis; 1 disabled, left out. A key has access to a route when it is not disabled and carries every permission the route requires. IP whitelists are the keys' own and do not depend on the policy: a key counted here is still refused outside its whitelist.
`);
  });

  it('says when no key gains or loses access, and names a permission that stops meaning anything', () => {
    const impact = keyImpact(policy({ 'GET /x': ['p_a'] }), policy({ 'GET /x': ['p_a'] }, ['p_a']), [key('key_1', 'acq_1', ['p_a', 'p_c'])]);
    const markdown = impactMarkdown(impact, 'old.yaml', 'new.yaml');
    expect(markdown).toContain('No key gains or loses access to any route (1 key judged).');
    expect(markdown).toContain('- `p_c` (removed from the catalogue by this change): 1 key: `acq_1` (1): `key_1`. It grants nothing under the new policy.');
  });

  it('a new route and a removed one say so', () => {
    const impact = keyImpact(policy({ 'GET /old': ['p_a'] }), policy({ 'GET /new': ['p_a'] }), [key('key_1', 'acq_1', ['p_a'])]);
    const markdown = impactMarkdown(impact, 'o', 'n');
    expect(markdown).toContain('### `GET /old` (route `r0_get`)\n\nRemoved; it required `p_a`.');
    expect(markdown).toContain('### `GET /new` (route `r0_get`)\n\nA new route; requires `p_a`.');
  });
});
