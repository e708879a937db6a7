import { compileTemplate, overlappingPath, templateMatches } from '../../../src/policy/template.js';
import type { ParamTypeName } from '../../../src/policy/param-types.js';

const t = (path: string, params: Record<string, ParamTypeName> = {}) => compileTemplate(path, params);

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

it('errs on the side of refusing: an overlap only on impossible dates is still reported', () => {
  expect(overlappingPath(t('/x/:d', { d: 'date' }), t('/x/:n-13-01', { n: 'integer' }))).toMatch(/^\/x\/[1-9]\d{3}-13-01$/);
});
