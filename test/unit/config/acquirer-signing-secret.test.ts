import { ConfigError, loadConfig } from '../../../src/config/load-config.js';

const base = { UPSTREAM_URL: 'http://127.0.0.1:9000' };
const NEW = 'n'.repeat(20) + 'EW-secret-0123';
const OLD = 'o'.repeat(20) + 'LD-secret-0123';

function problems(value: string): string[] {
  try {
    loadConfig({ ...base, ACQUIRER_SIGNING_SECRET: value });
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('ACQUIRER_SIGNING_SECRET', () => {
  it('is none when unset or empty', () => {
    expect(loadConfig(base).acquirerSigningSecret).toEqual([]);
    expect(loadConfig({ ...base, ACQUIRER_SIGNING_SECRET: '' }).acquirerSigningSecret).toEqual([]);
  });

  it('takes one secret, or two in the order given, each of 32 characters or more', () => {
    expect(NEW).toHaveLength(34);
    expect(loadConfig({ ...base, ACQUIRER_SIGNING_SECRET: NEW }).acquirerSigningSecret).toEqual([NEW]);
    expect(loadConfig({ ...base, ACQUIRER_SIGNING_SECRET: `${NEW},${OLD}` }).acquirerSigningSecret).toEqual([NEW, OLD]);
    expect(loadConfig({ ...base, ACQUIRER_SIGNING_SECRET: 'x'.repeat(32) }).acquirerSigningSecret).toEqual(['x'.repeat(32)]);
    expect(loadConfig(base, { 'acquirer-signing-secret': NEW }).acquirerSigningSecret).toEqual([NEW]);
  });

  it.each([
    ['too short', 'x'.repeat(31), 'the secret is shorter than 32 characters'],
    ['the second too short', `${NEW},short-secret-but-not-enough`, 'the second secret is shorter than 32 characters'],
    ['an empty second (a trailing comma)', `${NEW},`, 'the second secret is shorter than 32 characters'],
    ['three secrets', `${NEW},${OLD},${NEW}x`, 'holds 3 comma-separated secrets; at most 2 (the new one, then the old one, while rotating)'],
    ['a space', `${NEW.slice(0, 16)} ${NEW.slice(16)}`, 'the secret holds white space or a control character'],
    ['a space after the comma', `${NEW}, ${OLD}`, 'the second secret holds white space or a control character'],
    ['a trailing newline', `${NEW}\n`, 'the secret holds white space or a control character'],
    ['a tab', `${NEW}\t${OLD}`, 'the secret holds white space or a control character'],
    ['a control character', `${NEW}\u0007`, 'the secret holds white space or a control character'],
  ])('refuses %s with one line naming the variable, without the value', (_what, value, message) => {
    const lines = problems(value);
    expect(lines).toEqual([`ACQUIRER_SIGNING_SECRET: ${message}`]);
    for (const part of value.split(/[\s,]+/).filter((p) => p.length >= 8)) {
      for (let i = 0; i + 8 <= part.length; i++) expect(lines[0]).not.toContain(part.slice(i, i + 8));
    }
  });
});
