import { parseBearer } from '../../../src/plugins/api-key-auth/parse-bearer.js';

const KEY = 'acquirer_key_' + 'A'.repeat(43);
const raw = (...values: string[]) => values.flatMap((v) => ['Authorization', v]);

describe('parseBearer', () => {
  it.each([
    ['Bearer', `Bearer ${KEY}`],
    ['lower-case scheme', `bearer ${KEY}`],
    ['upper-case scheme', `BEARER ${KEY}`],
    ['mixed-case scheme', `bEaReR ${KEY}`],
    ['several spaces', `Bearer   ${KEY}`],
    ['a longer key', `Bearer acquirer_key_${'x'.repeat(64)}`],
  ])('accepts %s', (_name, value) => {
    const result = parseBearer(raw(value));
    expect(result).toEqual({ ok: true, token: value.split(/ +/)[1] });
  });

  it('finds the header whatever the case of its name', () => {
    expect(parseBearer(['authorization', `Bearer ${KEY}`])).toEqual({ ok: true, token: KEY });
    expect(parseBearer(['AUTHORIZATION', `Bearer ${KEY}`])).toEqual({ ok: true, token: KEY });
  });

  it.each([
    ['no Authorization header', [], 'API_KEY_MISSING'],
    ['another scheme', raw(`Basic ${KEY}`), 'API_KEY_MISSING'],
    ['a scheme that only starts with Bearer', raw(`Bearerx ${KEY}`), 'API_KEY_MISSING'],
    ['the scheme alone', raw('Bearer'), 'API_KEY_MALFORMED'],
    ['a tab instead of a space', raw(`Bearer\t${KEY}`), 'API_KEY_MISSING'],
    ['two tokens', raw(`Bearer ${KEY} ${KEY}`), 'API_KEY_MALFORMED'],
    ['the spec example prefix', raw(`Bearer acquirer_api_key_${'A'.repeat(43)}`), 'API_KEY_MALFORMED'],
    ['a short random part', raw(`Bearer acquirer_key_${'A'.repeat(42)}`), 'API_KEY_MALFORMED'],
    ['a character outside base64url', raw(`Bearer acquirer_key_${'A'.repeat(42)}+`), 'API_KEY_MALFORMED'],
    ['an over-long key', raw(`Bearer acquirer_key_${'A'.repeat(129)}`), 'API_KEY_MALFORMED'],
    ['two Authorization headers', raw(`Bearer ${KEY}`, `Bearer ${KEY}`), 'BAD_REQUEST'],
    ['an empty second Authorization header', raw(`Bearer ${KEY}`, ''), 'BAD_REQUEST'],
  ])('refuses %s', (_name, rawHeaders, code) => {
    expect(parseBearer(rawHeaders as string[])).toEqual({ ok: false, code });
  });
});
