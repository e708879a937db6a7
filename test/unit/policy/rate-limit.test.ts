import { parsePolicy } from '../../../src/policy/load.js';
import { rateLimitedPolicyText } from '../../helpers/policy.js';

const compile = (text: string) => parsePolicy(text, 'policy.yaml');
const problems = (text: string) => {
  const result = compile(text);
  if (result.ok) throw new Error('accepted');
  return result.errors.map((e) => `${e.line ?? '?'}: ${e.message}`);
};

describe('rates in the policy', () => {
  it("give every route the default budget, and a route with its own rate its own", () => {
    const result = compile(rateLimitedPolicyText({ defaultRate: '{ per_second: 20, burst: 40 }', downloadRate: '{ per_second: 0.5, burst: 2 }' }));
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    const rate = (id: string) => result.policy.routes.find((r) => r.id === id)!.rateLimit;
    expect(rate('eod_statements_list')).toMatchObject({ budget: 'default', perSecond: 20, burst: 40, intervalMs: 50 });
    expect(rate('api_keys_permissions')).toMatchObject({ budget: 'default' });
    expect(rate('eod_statement_download')).toMatchObject({ budget: 'eod_statement_download', perSecond: 0.5, burst: 2, intervalMs: 2000 });
  });

  it('leave every route unlimited when none is declared, and a route of its own only where one is', () => {
    const result = compile(rateLimitedPolicyText({ downloadRate: '{ per_second: 1, burst: 1 }' }));
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    expect(result.policy.routes.filter((r) => r.rateLimit !== undefined).map((r) => r.id)).toEqual(['eod_statement_download']);
  });

  it.each([
    ['{ per_second: 0, burst: 1 }', 'per_second'],
    ['{ per_second: 1, burst: 0 }', 'burst'],
    ['{ per_second: 1, burst: 1.5 }', 'burst'],
    ['{ per_second: 1 }', 'burst'],
    ['{ per_second: 1, burst: 1, window: 60 }', 'window'],
    ['{ per_second: 0.00001, burst: 1 }', 'more than a day'],
  ])('refuse %s, with the line and the field', (spec, field) => {
    const errors = problems(rateLimitedPolicyText({ defaultRate: spec }));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^\d+: /);
    expect(errors[0]).toContain(field);
  });

  it('refuse a route named `default` with a rate of its own: the headers could not tell its budget from the default', () => {
    const text = rateLimitedPolicyText({ downloadRate: '{ per_second: 1, burst: 1 }' }).replace('id: eod_statement_download\n', 'id: default\n');
    expect(problems(text)).toEqual([expect.stringContaining('"default" names the default rate in the RateLimit headers')]);
  });
});
