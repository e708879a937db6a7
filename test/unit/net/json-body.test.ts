import fc from 'fast-check';
import { checkJsonBody, DEFAULT_MAX_DEPTH, type JsonBodyProblem, type JsonBodyRules } from '../../../src/net/json-body.js';

const RULES: JsonBodyRules = { maxDepth: DEFAULT_MAX_DEPTH, tenantFields: new Set(['acquirer_id', 'tenant']) };
const NO_TENANTS: JsonBodyRules = { maxDepth: DEFAULT_MAX_DEPTH, tenantFields: new Set() };
const PROBLEMS: JsonBodyProblem[] = ['invalid_utf8', 'lone_surrogate', 'byte_order_mark', 'syntax', 'too_deep', 'duplicate_name', 'tenant_field'];

const check = (body: string | number[], rules = RULES) => checkJsonBody(typeof body === 'string' ? Buffer.from(body) : Uint8Array.from(body), rules);
const bytesOf = (text: string) => [...Buffer.from(text)];
/** `"k0":0,"k1":1,…` for `count` members. */
const members = (count: number) => Array.from({ length: count }, (_, k) => `"k${k}":${k}`).join(',');

describe('checkJsonBody accepts', () => {
  it.each([
    '{}', '[]', '""', '0', '-0', '1.5e-3', '1E+2', '-12.50E7', 'true', 'false', 'null',
    ' \t\r\n{ "a" : [ 1 , 2 , { } , [ ] ] }\n ',
    '{"a":{"a":1}}',
    '[{"a":1},{"a":2}]',
    '{"a":1,"A":2}',
    '"\\u00E9\\u00e9\\uD83D\\uDE00"',
    '"\\"\\\\\\/\\b\\f\\n\\r\\t"',
    '"é€😀\u007f"',
    '{"note":"acquirer_id","list":["tenant",{"x":"ACQUIRER_ID"}]}',
    '{"acquirer":1,"id":2,"acquirer_ids":3,"my_tenant":4}',
    '1'.repeat(1000),
    '1e400',
    `-0.${'0'.repeat(1000)}1e-99999`,
  ])('%s', (body) => {
    expect(check(body)).toBeNull();
  });

  it('a string of 1 MiB, ASCII or not', () => {
    expect(check(`"${'x'.repeat(1 << 20)}"`)).toBeNull();
    expect(check(`{"s":"${'é😀\\n'.repeat(1 << 17)}"}`)).toBeNull();
  });

  it('nesting exactly maxDepth deep, of arrays and of objects', () => {
    expect(check('['.repeat(32) + ']'.repeat(32))).toBeNull();
    expect(check('{"a":'.repeat(31) + '[]' + '}'.repeat(31))).toBeNull();
    expect(check('[[1]]', { ...RULES, maxDepth: 2 })).toBeNull();
    expect(check('1', { ...RULES, maxDepth: 0 })).toBeNull();
  });

  it('big objects, and a name in a child object that is also in its parent', () => {
    expect(check(`{${members(40)}}`)).toBeNull();
    expect(check(`{${members(200)}}`)).toBeNull();
    expect(check(`{"k0":1,"c":{${members(80)}},"k1":{${members(3)}},"d":[{${members(70)}},{${members(17)}}]}`)).toBeNull();
  });

  it('a Uint8Array that is a view into a larger buffer, not a Buffer', () => {
    const whole = Buffer.from('xx{"a":1,"b":2}{"a":1,"a":2}');
    expect(checkJsonBody(new Uint8Array(whole.buffer, whole.byteOffset + 2, 13), RULES)).toBeNull();
    expect(checkJsonBody(new Uint8Array(whole.buffer, whole.byteOffset + 15, 13), RULES)).toEqual({ problem: 'duplicate_name', offset: 7 });
  });
});

describe('checkJsonBody refuses', () => {
  it.each<[string, string | number[], JsonBodyProblem, number]>([
    ['an empty body', '', 'syntax', 0],
    ['whitespace only', ' \r\n\t', 'syntax', 4],
    ['trailing garbage', '{} x', 'syntax', 3],
    ['two values', '{}{}', 'syntax', 2],
    ['two numbers', '1 2', 'syntax', 2],
    ['a byte-order mark', '\ufeff{}', 'byte_order_mark', 0],
    ['a byte-order mark after whitespace', ' \ufeff{}', 'syntax', 1],
    ['a form feed as whitespace', '\f{}', 'syntax', 0],
    ['a vertical tab between values', '[1,\v2]', 'syntax', 3],
    ['a no-break space as whitespace', '[1,\u00a02]', 'syntax', 3],
    ['an overlong form (C0 AF)', [0x22, 0xc0, 0xaf, 0x22], 'invalid_utf8', 1],
    ['an overlong three-byte form (E0 80 AF)', [0x22, 0xe0, 0x80, 0xaf, 0x22], 'invalid_utf8', 1],
    ['an overlong four-byte form (F0 8F BF BF)', [0x22, 0xf0, 0x8f, 0xbf, 0xbf, 0x22], 'invalid_utf8', 1],
    ['an encoded surrogate (ED A0 80)', [0x22, 0x61, 0xed, 0xa0, 0x80, 0x22], 'invalid_utf8', 2],
    ['a lone high surrogate escape', '"a\\ud800"', 'lone_surrogate', 2],
    ['a lone low surrogate escape', '"\\udc00"', 'lone_surrogate', 1],
    ['a high surrogate escape before another escape', '{"\\ud800\\u0041":1}', 'lone_surrogate', 2],
    ['a high surrogate escape before a raw character', '["\\uD800x"]', 'lone_surrogate', 2],
    ['a pair in the wrong order', '"\\udc00\\ud800"', 'lone_surrogate', 1],
    ['a code point above U+10FFFF (F4 90 80 80)', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22], 'invalid_utf8', 1],
    ['a lead byte that cannot start anything (F5)', [0x22, 0xf5, 0x80, 0x80, 0x80, 0x22], 'invalid_utf8', 1],
    ['a lone continuation byte', [0x22, 0x80, 0x22], 'invalid_utf8', 1],
    ['a sequence cut short by the quote', [0x22, 0xe2, 0x82, 0x22], 'invalid_utf8', 1],
    ['a sequence truncated at the end of the body', [0x22, 0xe2, 0x82], 'invalid_utf8', 1],
    ['a two-byte sequence truncated at the end', [0x22, 0xc3], 'invalid_utf8', 1],
    ['invalid UTF-8 in a member name', [0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d], 'invalid_utf8', 2],
    ['a non-ASCII byte outside a string', [0x5b, ...bytesOf('é'), 0x5d], 'syntax', 1],
    ['a control character in a string', '"a\u0001b"', 'syntax', 2],
    ['a raw line feed in a string', '"a\nb"', 'syntax', 2],
    ['a raw tab in a name', '{"a\tb":1}', 'syntax', 3],
    ['an unterminated string', '"abc', 'syntax', 4],
    ['an escape cut off at the end', '"\\', 'syntax', 1],
    ['an unknown escape', '"\\x41"', 'syntax', 1],
    ['an escaped single quote', '"\\\'"', 'syntax', 1],
    ['an upper-case \\U', '"\\U0041"', 'syntax', 1],
    ['a short \\u escape', '"\\u12"', 'syntax', 1],
    ['a \\u escape with a non-hex digit', '"ab\\u12G4"', 'syntax', 3],
    ['a leading zero', '01', 'syntax', 1],
    ['a negative leading zero', '-01', 'syntax', 2],
    ['a lone minus', '-', 'syntax', 1],
    ['a minus before a letter', '-a', 'syntax', 1],
    ['a dot with no fraction', '1.', 'syntax', 2],
    ['a fraction with no integer', '.5', 'syntax', 0],
    ['a plus sign', '+1', 'syntax', 0],
    ['an exponent with no digits', '1e', 'syntax', 2],
    ['an exponent with a sign and no digits', '[1E+]', 'syntax', 4],
    ['a hex number', '0x10', 'syntax', 1],
    ['a trailing comma in an array', '[1,]', 'syntax', 3],
    ['a trailing comma in an object', '{"a":1,}', 'syntax', 7],
    ['a leading comma', '[,1]', 'syntax', 1],
    ['a missing colon', '{"a" 1}', 'syntax', 5],
    ['a missing value', '{"a":}', 'syntax', 5],
    ['an unquoted name', '{a:1}', 'syntax', 1],
    ['a number as a name', '{1:1}', 'syntax', 1],
    ['single quotes', "{'a':1}", 'syntax', 1],
    ['a single-quoted string', "'a'", 'syntax', 0],
    ['a line comment', '// c\n{}', 'syntax', 0],
    ['a block comment inside', '[1 /* c */]', 'syntax', 3],
    ['NaN', 'NaN', 'syntax', 0],
    ['Infinity', '[Infinity]', 'syntax', 1],
    ['-Infinity', '-Infinity', 'syntax', 1],
    ['a truncated literal', 'tru', 'syntax', 0],
    ['a misspelt literal', 'trUe', 'syntax', 2],
    ['a literal with more after it', 'nulll', 'syntax', 4],
    ['a capitalised literal', 'True', 'syntax', 0],
    ['an unclosed array', '[1', 'syntax', 2],
    ['a mismatched bracket', '[1}', 'syntax', 2],
    ['a duplicate name', '{"a":1,"a":2}', 'duplicate_name', 7],
    ['a duplicate hidden by a \\u escape', '{"a":1,"\\u0061":2}', 'duplicate_name', 7],
    ['a duplicate hidden by \\/', '{"x/y":1,"x\\/y":2}', 'duplicate_name', 9],
    ['a duplicate hidden by \\u002F', '{"x\\/y":1,"x\\u002Fy":2}', 'duplicate_name', 10],
    ['a non-ASCII duplicate hidden by an escape', '{"é":1,"\\u00e9":2}', 'duplicate_name', 8],
    ['an astral duplicate hidden by a surrogate pair', '{"😀":1,"\\ud83d\\ude00":2}', 'duplicate_name', 10],
    ['a duplicate at depth 3', '{"x":{"y":{"a":1,"b":2,"a":3}}}', 'duplicate_name', 23],
    ['a duplicate in an object inside arrays', '[{"a":1},[{"b":1,"b":2}]]', 'duplicate_name', 17],
    ['a duplicate after a nested object', '{"a":{"b":1},"a":2}', 'duplicate_name', 13],
    ['a duplicate of the first of 17 names', `{${members(16)},"k0":0}`, 'duplicate_name', members(16).length + 2],
    ['a duplicate of the last of 64 names', `{${members(64)},"k63":0}`, 'duplicate_name', members(64).length + 2],
    ['a duplicate of the first of 65 names', `{${members(64)},"k0":0}`, 'duplicate_name', members(64).length + 2],
    ['a duplicate of the 65th name, the first compared as a string', `{${members(65)},"k64":0}`, 'duplicate_name', members(65).length + 2],
    ['a duplicate of the 66th name', `{${members(70)},"k65":0}`, 'duplicate_name', members(70).length + 2],
    ['a duplicate of the first of 100 names', `{${members(99)},"k0":0}`, 'duplicate_name', members(99).length + 2],
    ['an escaped duplicate of the first of 20 names', `{${members(19)},"k\\u0030":0}`, 'duplicate_name', members(19).length + 2],
    ['an escaped duplicate of the first of 80 names', `{${members(79)},"k\\u0030":0}`, 'duplicate_name', members(79).length + 2],
    ['a duplicate in the parent after a child of 20 names', `{"a":1,"c":{${members(20)}},"a":2}`, 'duplicate_name', members(20).length + 14],
    ['a duplicate in the parent after a child of 80 names', `{"a":1,"c":{${members(80)}},"a":2}`, 'duplicate_name', members(80).length + 14],
    ['a tenant field', '{"acquirer_id":"x"}', 'tenant_field', 1],
    ['a tenant field in upper case', '{"ACQUIRER_ID":1}', 'tenant_field', 1],
    ['a tenant field in mixed case', '{"amount":1,"Tenant":2}', 'tenant_field', 12],
    ['a tenant field spelt with an escape', '{"acquirer\\u005fid":1}', 'tenant_field', 1],
    ['a tenant field spelt wholly with escapes', '{"\\u0054\\u0065\\u006E\\u0061\\u006e\\u0074":1}', 'tenant_field', 1],
    ['a tenant field at depth 3', '{"a":{"b":{"acquirer_id":1}}}', 'tenant_field', 11],
    ['a tenant field in nested arrays', '[[{"x":[{"acquirer_id":1}]}]]', 'tenant_field', 9],
    // A tenant field is reported only when nothing else is wrong: a malformed body is that, whatever it names.
    ['a tenant field that is also a duplicate', '{"a":1,"acquirer_id":1,"acquirer_id":2}', 'duplicate_name', 23],
    ['a tenant field before a duplicate', '{"acquirer_id":1,"a":1,"a":2}', 'duplicate_name', 23],
    ['a tenant field in a body cut short', '{"acquirer_id":1,', 'syntax', 17],
    ['a tenant field before too much depth', '{"acquirer_id":1,"a":' + '['.repeat(32) + ']'.repeat(32) + '}', 'too_deep', 52],
    ['the first of two tenant fields', '{"a":{"tenant":1},"acquirer_id":2}', 'tenant_field', 6],
    ['33 nested arrays', '['.repeat(33) + ']'.repeat(33), 'too_deep', 32],
    ['33 nested objects', '{"a":'.repeat(33) + '1' + '}'.repeat(33), 'too_deep', 160],
    ['60,000 open brackets', '['.repeat(60_000), 'too_deep', 32],
  ])('%s', (_, body, problem, offset) => {
    expect(check(body)).toEqual({ problem, offset });
  });

  it('any container when maxDepth is 0, and one level too many for a lower maxDepth', () => {
    expect(check('[]', { ...RULES, maxDepth: 0 })).toEqual({ problem: 'too_deep', offset: 0 });
    expect(check('[{"a":[1]}]', { ...RULES, maxDepth: 2 })).toEqual({ problem: 'too_deep', offset: 6 });
  });

  it.each(Array.from({ length: 0x20 }, (_, c) => [c.toString(16).padStart(2, '0'), c]))('the control character %s unescaped in a string', (_, c) => {
    expect(check([0x22, c, 0x22])).toEqual({ problem: 'syntax', offset: 1 });
  });

  it('a duplicate among names whose hashes clash (name_72vu and name_euea under the 30-bit FNV-1a the checker compares first)', () => {
    expect(check('{"name_72vu":1,"name_euea":2}')).toBeNull();
    expect(check('{"name_72vu":1,"name_euea":2,"x":3,"name_72vu":4}')).toEqual({ problem: 'duplicate_name', offset: 35 });
    expect(check('{"name_euea":1,"a":0,"name_72vu":2,"name_euea":3}')).toEqual({ problem: 'duplicate_name', offset: 35 });
  });

  it('no name at all when the tenant set is empty', () => {
    expect(check('{"acquirer_id":1}', NO_TENANTS)).toBeNull();
  });

  it('a name that lower-cases to a tenant field by Unicode rules (K, the Kelvin sign, is k)', () => {
    expect(check('{"\u212Aey":1}', { ...RULES, tenantFields: new Set(['key']) })).toEqual({ problem: 'tenant_field', offset: 1 });
  });
});

/** How deep a value nests: 0 for a scalar, 1 for `[]`. */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  return 1 + Math.max(0, ...Object.values(value).map(depthOf));
}

/** Every object in a value (the value itself included), in document order. */
function objectsIn(value: unknown): Record<string, unknown>[] {
  if (value === null || typeof value !== 'object') return [];
  const inner = Object.values(value).flatMap(objectsIn);
  return Array.isArray(value) ? inner : [value as Record<string, unknown>, ...inner];
}

/** JSON.stringify's output, but with `extra` (a member's text) spliced into the members of `target` at `at`. */
function serialize(value: unknown, target: object, at: number, extra: string): string {
  if (Array.isArray(value)) return `[${value.map((item) => serialize(item, target, at, extra)).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const members = Object.entries(value).map(([name, item]) => `${JSON.stringify(name)}:${serialize(item, target, at, extra)}`);
  if (value === target) members.splice(at % (members.length + 1), 0, extra);
  return `{${members.join(',')}}`;
}

/** A name as a JSON literal, each UTF-16 unit `\u`-escaped where `escape` says so (cycled), in the case `upper` says. */
function spell(name: string, escape: boolean[], upper: boolean[]): string {
  let out = '';
  for (let k = 0; k < name.length; k++) {
    const unit = name.charCodeAt(k);
    const hex = unit.toString(16).padStart(4, '0');
    const escaped = `\\u${upper[k % Math.max(upper.length, 1)] ? hex.toUpperCase() : hex}`;
    out += escape[k % Math.max(escape.length, 1)] ? escaped : JSON.stringify(name[k]).slice(1, -1);
  }
  return `"${out}"`;
}

const jsonValue = fc.oneof(fc.jsonValue({ maxDepth: 6 }), fc.jsonValue({ maxDepth: 4, stringUnit: 'binary' }));
const rootObject = fc.dictionary(fc.oneof(fc.string(), fc.string({ unit: 'binary' })), jsonValue, { minKeys: 1, maxKeys: 5 });
const space = fc.stringMatching(/^[ \t\r\n]{0,3}$/);

describe('property: what JSON.stringify writes', () => {
  it('is accepted, however indented, unless nested deeper than maxDepth', () => {
    // size 'max': lengths spread over 0..34, so depths near 32 on both sides come up often.
    const wrappers = fc.array(fc.boolean(), { maxLength: 34, size: 'max' });
    fc.assert(
      fc.property(jsonValue, wrappers, fc.constantFrom(undefined, 1, '\t', '\r\n', ' \n'), space, space, (inner, wrap, indent, before, after) => {
        const value = wrap.reduce<unknown>((v, asArray) => (asArray ? [v] : { v }), inner);
        const body = Buffer.from(before + JSON.stringify(value, null, indent) + after);
        expect(checkJsonBody(body, NO_TENANTS)).toEqual(depthOf(value) <= DEFAULT_MAX_DEPTH ? null : { problem: 'too_deep', offset: expect.any(Number) });
      }),
      { numRuns: 2000 },
    );
  });
});

/**
 * For a text JSON.parse accepts, the first duplicate name, tenant field or nesting too deep, left to
 * right: a walk over its tokens, independent of the checker's byte scan.
 */
function reference(text: string, rules: JsonBodyRules): JsonBodyProblem | null {
  const tokens = [...text.matchAll(/"(?:[^"\\]|\\.)*"|[{}[\]:]/g)].map((m) => m[0]);
  const open: (Set<string> | null)[] = [];
  let tenant = false;
  for (const [k, token] of tokens.entries()) {
    if (token === '{' || token === '[') {
      open.push(token === '{' ? new Set() : null);
      if (open.length > rules.maxDepth) return 'too_deep';
    } else if (token === '}' || token === ']') open.pop();
    else if (tokens[k + 1] === ':') {
      const name = JSON.parse(token) as string;
      tenant ||= rules.tenantFields.has(name.toLowerCase());
      const names = open.at(-1)!;
      if (names.has(name)) return 'duplicate_name';
      names.add(name);
    }
  }
  // A tenant field only when nothing else is wrong: a malformed body is that, whatever it names.
  return tenant ? 'tenant_field' : null;
}

/** Half a surrogate pair, alone in a string: no character at all. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const ws = fc.constantFrom('', '', '', ' ', '\n', '\t ', '\r\n');
const names = fc.constantFrom('"a"', '"b"', '"A"', '"\\u0061"', '"x/y"', '"x\\/y"', '"acquirer_id"', '"Acquirer\\u005FId"', '"é"', '"\\u00e9"', '"\\ud83d\\ude00"', '"😀"');
const jsonish = fc.letrec<{ value: string; scalar: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, tie('scalar'), tie('array'), tie('object')),
  scalar: fc.constantFrom('0', '-1.5e+3', '12', '"s"', '"acquirer_id"', 'true', 'false', 'null', '"\\ud83d\\ude00"', '1e400', '"é"'),
  array: fc.array(fc.tuple(ws, tie('value'), ws), { maxLength: 4 }).map((items) => `[${items.map((i) => i.join('')).join(',')}]`),
  object: fc.array(fc.tuple(ws, names, ws, tie('value')), { maxLength: 4 }).map((ms) => `{${ms.map(([a, n, b, v]) => `${a}${n}${b}:${v}`).join(',')}}`),
}));
const pieces = ['{', '}', '[', ']', ',', ':', '"', '\\', '\\u', '\\u00', '0', '1', '-', '.', 'e', '+', '01', 'tru', 'NaN', ' ', '\u0001', '\u001f', '\f', '\v', '\u00a0', '\u00e9', '\ud83d', "'", '/', '\ufeff', '"a":1', ',"a":1'];
const mutated = fc.tuple(jsonish.value, fc.nat(), fc.nat({ max: 2 }), fc.constantFrom('', ...pieces)).map(([text, at, cut, insert]) => {
  const p = at % (text.length + 1);
  return text.slice(0, p) + insert + text.slice(p + cut);
});
const texts = fc.oneof(jsonish.value, jsonish.value, mutated, fc.string({ unit: 'binary', maxLength: 30 }), fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((p) => p.join('')));

describe('property: agreement with JSON.parse', () => {
  it('accepts only what JSON.parse accepts, and of that refuses exactly what has a duplicate, a tenant field or too much depth', () => {
    let accepted = 0;
    let refusedValid = 0;
    fc.assert(
      fc.property(texts, fc.constantFrom(3, 32), (text, maxDepth) => {
        const rules: JsonBodyRules = { maxDepth, tenantFields: new Set(['acquirer_id']) };
        const bytes = Buffer.from(text);
        const seen = bytes.toString(); // a lone surrogate becomes U+FFFD here, as the checker sees it
        const verdict = checkJsonBody(bytes, rules);
        if (verdict !== null) {
          expect(PROBLEMS).toContain(verdict.problem);
          expect(verdict.offset).toBeGreaterThanOrEqual(0);
          expect(verdict.offset).toBeLessThanOrEqual(bytes.length);
        }
        let parses = true;
        try {
          JSON.parse(seen);
        } catch {
          parses = false;
        }
        // A surrogate escape that is not half of a pair, in any string of it (the duplicate it may sit in included).
        const lone = parses && [...seen.matchAll(/"(?:[^"\\]|\\.)*"/g)].some(([literal]) => LONE_SURROGATE.test(JSON.parse(literal) as string));
        if (!parses || lone) expect(verdict).not.toBeNull();
        else expect(verdict?.problem ?? null).toBe(reference(seen, rules));
        if (verdict === null) accepted++;
        else if (parses) refusedValid++;
      }),
      { numRuns: 5000 },
    );
    // Both sides are reached often enough for the property to say something.
    expect(accepted).toBeGreaterThan(500);
    expect(refusedValid).toBeGreaterThan(200);
  });
});

describe('property: inserted members', () => {
  const choice = fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.array(fc.boolean(), { maxLength: 8 }), fc.array(fc.boolean(), { maxLength: 8 }));

  it('a second member with a name already in the same object, however spelt, makes it duplicate_name', () => {
    fc.assert(
      fc.property(rootObject, choice, (root, [which, nameAt, at, escape, upper]) => {
        const candidates = objectsIn(root).filter((o) => Object.keys(o).length > 0);
        const target = candidates[which % candidates.length]!;
        const keys = Object.keys(target);
        const body = Buffer.from(serialize(root, target, at, `${spell(keys[nameAt % keys.length]!, escape, upper)}:0`));
        const verdict = checkJsonBody(body, NO_TENANTS);
        expect(verdict?.problem).toBe('duplicate_name');
        expect(body[verdict!.offset]).toBe(0x22);
      }),
      { numRuns: 1000 },
    );
  });

  it('a duplicate is found in an object of any size (names compared as bytes up to 64, then as strings), spelt any way, nested or not', () => {
    // Short names of few characters, so that near misses (same length, same first bytes) abound.
    const names = fc.uniqueArray(fc.stringMatching(/^[ab\/é]{0,4}$/), { maxLength: 90, size: 'max' });
    const duplicate = fc.option(fc.tuple(fc.nat(), fc.nat(), fc.boolean()));
    const wrap = fc.constantFrom((o: string) => o, (o: string) => `{"a":${o},"a\\/":[${o}],"b":1}`, (o: string) => `[{"a":1,"b":${o}},{"b":${o},"a":2}]`);
    fc.assert(
      fc.property(names, fc.array(fc.boolean(), { minLength: 1, maxLength: 90 }), duplicate, wrap, (list, escapes, dup, place) => {
        const members = list.map((name, k) => `${spell(name, [escapes[k % escapes.length]!], [k % 2 === 0])}:${k}`);
        const hasDuplicate = dup !== null && list.length > 0;
        if (hasDuplicate) members.splice(dup[1] % (members.length + 1), 0, `${spell(list[dup[0] % list.length]!, [dup[2]], [])}:0`);
        const verdict = checkJsonBody(Buffer.from(place(`{${members.join(',')}}`)), NO_TENANTS);
        expect(verdict?.problem ?? null).toBe(hasDuplicate ? 'duplicate_name' : null);
      }),
      { numRuns: 2000 },
    );
  });

  it('a member named for the tenant, in any case and however spelt, at any depth, makes it tenant_field', () => {
    const rules: JsonBodyRules = { maxDepth: DEFAULT_MAX_DEPTH, tenantFields: new Set(['acquirer_id', 'merchant']) };
    fc.assert(
      fc.property(rootObject, choice, fc.array(fc.boolean(), { minLength: 1, maxLength: 11 }), (root, [which, nameAt, at, escape, upper], caps) => {
        const candidates = objectsIn(root);
        const target = candidates[which % candidates.length]!;
        const tenant = [...rules.tenantFields][nameAt % rules.tenantFields.size]!;
        const name = [...tenant].map((ch, k) => (caps[k % caps.length] ? ch.toUpperCase() : ch)).join('');
        const body = Buffer.from(serialize(root, target, at, `${spell(name, escape, upper)}:{"x":1}`));
        const verdict = checkJsonBody(body, rules);
        expect(verdict?.problem).toBe('tenant_field');
        expect(body[verdict!.offset]).toBe(0x22);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('property: arbitrary bytes', () => {
  const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const decodes = (bytes: Uint8Array) => {
    try {
      fatal.decode(bytes);
      return true;
    } catch {
      return false;
    }
  };
  /** Bytes that make UTF-8 go wrong, or right, at its edges. */
  const edgy = fc.constantFrom(0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff);
  const jsonByte = fc.constantFrom(...Buffer.from('{}[],:"\\u0aeE+-.1 \n\t'));

  it('never throw, and are accepted only when they are UTF-8 that JSON.parse accepts', () => {
    const body = fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.array(fc.oneof(edgy, jsonByte), { maxLength: 40 }).map((b) => Uint8Array.from(b)));
    fc.assert(
      fc.property(body, (bytes) => {
        const verdict = checkJsonBody(bytes, RULES);
        if (verdict !== null) {
          expect(PROBLEMS).toContain(verdict.problem);
          expect(verdict.offset).toBeLessThanOrEqual(bytes.length);
        }
        if (!decodes(bytes)) expect(verdict).not.toBeNull();
        if (verdict === null) expect(() => JSON.parse(fatal.decode(bytes))).not.toThrow();
      }),
      { numRuns: 5000 },
    );
  });

  it('inside a string, are invalid_utf8 exactly when a strict UTF-8 decoder refuses them', () => {
    const textByte = fc.oneof(edgy, fc.integer({ min: 0x20, max: 0xff })).filter((c) => c !== 0x22 && c !== 0x5c);
    fc.assert(
      fc.property(fc.array(textByte, { maxLength: 12 }), (inner) => {
        const verdict = checkJsonBody(Uint8Array.from([0x22, ...inner, 0x22]), RULES);
        expect(verdict === null ? 'ok' : verdict.problem).toBe(decodes(Uint8Array.from(inner)) ? 'ok' : 'invalid_utf8');
      }),
      { numRuns: 5000 },
    );
  });
});
