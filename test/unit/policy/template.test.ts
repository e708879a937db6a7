import { getIntersectionWordSets, JS, NFA } from 'refa';
import { compileValueType } from '../../../src/policy/value-types.js';
import { compileTemplate, overlappingPath, templateMatches, type CompiledTemplate } from '../../../src/policy/template.js';
import type { ParamTypeName } from '../../../src/policy/param-types.js';

const t = (path: string, params: Record<string, ParamTypeName> = {}) =>
  compileTemplate(path, Object.fromEntries(Object.entries(params).map(([name, type]) => [name, compileValueType(type)])));

describe('overlappingPath', () => {
  it.each([
    [t('/v1/x/:a-x', { a: 'slug' }), t('/v1/x/y-:b', { b: 'slug' })],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/latest')],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'uuid' })],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'integer' })],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'date' })],
    [t('/v1/x/a:a', { a: 'slug' }), t('/v1/x/:b-9', { b: 'slug' })],
    [t('/v1/x/:a.csv', { a: 'uuid' }), t('/v1/x/:b.csv', { b: 'uuid' })],
    // Found by the second review: overlaps no sample value of either type would hit.
    [t('/x/:d', { d: 'date' }), t('/x/:n-12-01', { n: 'integer' })],
    [t('/x/:d', { d: 'date' }), t('/x/2024-:n-01', { n: 'integer' })],
  ])('finds a real path both match (%#)', (a, b) => {
    const witness = overlappingPath(a, b);
    expect(witness).not.toBeNull();
    expect(templateMatches(a, witness!) && templateMatches(b, witness!)).toBe(true);
  });

  it.each([
    [t('/v1/x/:a.csv', { a: 'uuid' }), t('/v1/x/:b', { b: 'slug' })],
    [t('/v1/x/:a', { a: 'uuid' }), t('/v1/x/:b', { b: 'date' })],
    [t('/v1/x/:a', { a: 'integer' }), t('/v1/x/:b', { b: 'uuid' })],
    [t('/v1/x/a-:a', { a: 'slug' }), t('/v1/x/b-:b', { b: 'slug' })],
    [t('/v1/x/:a-x', { a: 'slug' }), t('/v1/x/:b-y', { b: 'slug' })],
    [t('/v1/x/by_date/:d.csv', { d: 'date' }), t('/v1/x/:id.csv', { id: 'uuid' })],
    [t('/v1/x'), t('/v1/y')],
  ])('knows disjoint templates (%#)', (a, b) => {
    expect(overlappingPath(a, b)).toBeNull();
  });
});

describe('overlappingPath settles most pairs segment by segment, and agrees with the automata on every pair', () => {
  // Literals and parameters of every type, with and without a prefix or suffix, in the second of
  // three segments; the first and last are literals, equal or not.
  const middles: [string, Record<string, ParamTypeName>][] = [
    ['latest', {}],
    ['123', {}],
    ['2024-01-31', {}],
    ['00000000-0000-0000-0000-000000000000.csv', {}],
    ['a-b', {}],
    [':p', { p: 'slug' }],
    [':p', { p: 'uuid' }],
    [':p', { p: 'date' }],
    [':p', { p: 'integer' }],
    [':p', { p: 'positive_integer' }],
    ['0', {}],
    [':p.csv', { p: 'uuid' }],
    [':p.r1', { p: 'uuid' }],
    [':p.r12', { p: 'slug' }],
    ['b-:p.csv', { p: 'slug' }],
    ['a-:p', { p: 'slug' }],
    [':p-b', { p: 'slug' }],
  ];
  const templates = ['x', 'y'].flatMap((first) => ['z', 'w'].flatMap((last) => middles.map(([middle, params]) => t(`/${first}/${middle}/${last}`, params))));
  /** The oracle: does any string match both, by intersecting the two whole-path automata. */
  const automaton = (template: CompiledTemplate) => {
    const { expression, maxCharacter } = JS.Parser.fromLiteral(new RegExp(template.regex.source.slice(1, -1))).parse();
    return NFA.fromRegex(expression, { maxCharacter });
  };
  const intersect = (a: CompiledTemplate, b: CompiledTemplate) => !getIntersectionWordSets(automaton(a), automaton(b))[Symbol.iterator]().next().done;

  it.each(templates.map((a) => [a.regex.source, a] as const))('%s against every template', (_name, a) => {
    for (const b of templates) {
      const witness = overlappingPath(a, b);
      expect({ b: b.regex.source, overlaps: witness !== null }).toEqual({ b: b.regex.source, overlaps: intersect(a, b) });
      if (witness !== null && templateMatches(a, witness)) expect(templateMatches(b, witness)).toBe(true);
    }
  });
});

it('errs on the side of refusing: an overlap only on impossible dates is still reported', () => {
  expect(overlappingPath(t('/x/:d', { d: 'date' }), t('/x/:n-13-01', { n: 'integer' }))).toMatch(/^\/x\/[1-9]\d{3}-13-01$/);
});
