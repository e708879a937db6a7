import { compileTemplate, overlappingPath } from '../../../src/policy/template.js';
import type { ParamTypeName } from '../../../src/policy/param-types.js';

const t = (path: string, params: Record<string, ParamTypeName> = {}) => compileTemplate(path, params);

describe('overlappingPath', () => {
  it.each([
    [t('/v1/x/:a-x', { a: 'slug' }), t('/v1/x/y-:b', { b: 'slug' }), '/v1/x/y-a-x'],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/latest'), '/v1/x/latest'],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'uuid' }), '/v1/x/00000000-0000-0000-0000-000000000000'],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'integer' }), '/v1/x/0'],
    [t('/v1/x/:a', { a: 'slug' }), t('/v1/x/:b', { b: 'date' }), '/v1/x/2024-02-29'],
    [t('/v1/x/a:a', { a: 'slug' }), t('/v1/x/:b-9', { b: 'slug' }), '/v1/x/a-9'],
    [t('/v1/x/:a.csv', { a: 'uuid' }), t('/v1/x/:b.csv', { b: 'uuid' }), '/v1/x/00000000-0000-0000-0000-000000000000.csv'],
  ])('finds a path both match (%#)', (a, b, witness) => {
    expect(overlappingPath(a, b)).toBe(witness);
    expect(a.regex.test(witness) && b.regex.test(witness)).toBe(true);
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
