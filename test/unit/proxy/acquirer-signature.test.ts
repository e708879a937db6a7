import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parsePolicy } from '../../../src/policy/load.js';
import { createAcquirerSigner } from '../../../src/proxy/acquirer-signature.js';
import { buildUpstreamHeaders } from '../../../src/proxy/request-headers.js';

/** The example of docs/security.md, "Verifying the acquirer header". */
const SECRET = 'test-secret-0123456789abcdefghijklmnop';
const OLD_SECRET = 'older-secret-0123456789abcdefghijklm';
const OTHER_SECRET = 'other-secret-0123456789abcdefghijklm';
const KEY = { id: 'key_0123456789abcdef0123', acquirerId: 'acq_1' };
const TARGET = '/v1/acquirer/eod_statements?page=2';
const T = 1_767_225_600;
/** HMAC-SHA256 of the example's signed text, by `openssl dgst -sha256 -hmac <secret>`. */
const KNOWN_V1 = '11856571a12080c8d097d52662247c2f0d4b40bb67724367e1e2d9509eb52ea7';
const KNOWN_OLD_V1 = '44aa2e87e4b50222f381120292aa874d5550e81e7d8ec8d3e27188af87c64845';

const VERIFIER_FILE = 'docs/verify-acquirer-signature.mjs';
type Verify = (req: { method: string; url: string; headers: IncomingHttpHeaders }, secrets: string[], nowSeconds?: number) => boolean;
let verifyAcquirerSignature: Verify;

beforeAll(async () => {
  ({ verifyAcquirerSignature } = await import(pathToFileURL(path.resolve(VERIFIER_FILE)).href));
});

/** The headers the signer adds, at the second `t` (plus some milliseconds: `t` is the second). */
function signed(secrets: string[], { method = 'GET', target = TARGET, key = KEY, t = T } = {}): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = {};
  createAcquirerSigner(secrets, () => t * 1000 + 999)!(headers, method, target, key);
  return headers;
}

/** A request as the backend receives it: the gateway's headers beside the acquirer header. */
function received(headers: OutgoingHttpHeaders, changes: Partial<{ method: string; url: string }> & { headers?: IncomingHttpHeaders } = {}) {
  return {
    method: changes.method ?? 'GET',
    url: changes.url ?? TARGET,
    headers: { 'x-acquirer-id': KEY.acquirerId, ...(headers as IncomingHttpHeaders), ...changes.headers },
  };
}

describe('createAcquirerSigner', () => {
  it('signs the second, method, request-target, acquirer id and key id with HMAC-SHA256, and sends the key id', () => {
    const independent = createHmac('sha256', SECRET).update(`${T}\nGET\n${TARGET}\nacq_1\nkey_0123456789abcdef0123`, 'utf8').digest('hex');
    expect(independent).toBe(KNOWN_V1);
    expect(signed([SECRET])).toEqual({ 'x-acquirer-signature': `t=${T},v1=${KNOWN_V1}`, 'x-acquirer-key-id': KEY.id });
  });

  it('carries a v1 for each of two secrets, in the order given', () => {
    expect(signed([SECRET, OLD_SECRET])['x-acquirer-signature']).toBe(`t=${T},v1=${KNOWN_V1},v1=${KNOWN_OLD_V1}`);
    expect(signed([OLD_SECRET, SECRET])['x-acquirer-signature']).toBe(`t=${T},v1=${KNOWN_OLD_V1},v1=${KNOWN_V1}`);
  });

  it('takes t from the clock when each request is signed', () => {
    let now = T * 1000;
    const sign = createAcquirerSigner([SECRET], () => now)!;
    const first: OutgoingHttpHeaders = {};
    sign(first, 'GET', TARGET, KEY);
    now += 61_500;
    const later: OutgoingHttpHeaders = {};
    sign(later, 'GET', TARGET, KEY);
    expect(first['x-acquirer-signature']).toMatch(new RegExp(`^t=${T},v1=`));
    expect(later['x-acquirer-signature']).toMatch(new RegExp(`^t=${T + 61},v1=`));
  });

  it('is none without a secret: nothing to add, nothing computed per request', () => {
    expect(createAcquirerSigner([])).toBeUndefined();
  });
});

describe('the verifier of docs/security.md', () => {
  it('is the page\'s code block, verbatim', () => {
    const page = readFileSync('docs/security.md', 'utf8');
    expect(page).toContain('```js\n' + readFileSync(VERIFIER_FILE, 'utf8') + '```\n');
  });

  it("and the page's example header are what the gateway's signer sends", () => {
    const page = readFileSync('docs/security.md', 'utf8').split('## Verifying the acquirer header')[1]!;
    const headers = signed([SECRET]);
    expect(page).toContain(`X-Acquirer-Signature: ${headers['x-acquirer-signature']}\nX-Acquirer-Key-Id: ${headers['x-acquirer-key-id']}\n`);
    expect(page).toContain(`\`${SECRET}\``);
  });

  it('accepts what the signer sends, with each secret of two, and refuses another secret', () => {
    const rotating = signed([SECRET, OLD_SECRET]);
    expect(verifyAcquirerSignature(received(rotating), [SECRET], T)).toBe(true);
    expect(verifyAcquirerSignature(received(rotating), [OLD_SECRET], T)).toBe(true);
    expect(verifyAcquirerSignature(received(rotating), [OTHER_SECRET, OLD_SECRET], T)).toBe(true);
    expect(verifyAcquirerSignature(received(rotating), [OTHER_SECRET], T)).toBe(false);
    expect(verifyAcquirerSignature(received(signed([SECRET])), [OLD_SECRET], T)).toBe(false);
  });

  it('takes a secret as its UTF-8 bytes, as the gateway does', () => {
    const secret = 'ünïcødé-sêcrét-0123456789-àbcdefghij';
    expect(verifyAcquirerSignature(received(signed([secret])), [secret], T)).toBe(true);
  });

  it.each([
    [-301, false],
    [-300, true],
    [0, true],
    [300, true],
    [301, false],
  ])('with t %i s from its clock, answers %s', (offset, verdict) => {
    expect(verifyAcquirerSignature(received(signed([SECRET], { t: T + offset })), [SECRET], T)).toBe(verdict);
  });

  it.each([
    ['another method', { method: 'DELETE' }],
    ['another path', { url: '/v1/acquirer/eod_statements?page=3' }],
    ['no query', { url: '/v1/acquirer/eod_statements' }],
    ['another acquirer', { headers: { 'x-acquirer-id': 'acq_2' } }],
    ['another key id', { headers: { 'x-acquirer-key-id': 'key_ffffffffffffffffffff' } }],
    ['no key id', { headers: { 'x-acquirer-key-id': undefined } }],
    ['no acquirer header', { headers: { 'x-acquirer-id': undefined } }],
    ['no signature', { headers: { 'x-acquirer-signature': undefined } }],
    ['a signature sent twice (Node joins the lines)', { headers: { 'x-acquirer-signature': `t=${T},v1=${KNOWN_V1}, t=${T},v1=${KNOWN_V1}` } }],
    ['a v1 not of 64 hex digits', { headers: { 'x-acquirer-signature': `t=${T},v1=${KNOWN_V1.slice(2)}` } }],
    ['another t', { headers: { 'x-acquirer-signature': `t=${T + 1},v1=${KNOWN_V1}` } }],
  ])('refuses a request with %s', (_what, changes) => {
    expect(verifyAcquirerSignature(received(signed([SECRET]), changes as Parameters<typeof received>[1]), [SECRET], T)).toBe(false);
  });
});

describe('the headers only the gateway sends', () => {
  it("are never a client's: its copies are dropped like any header not on the list", () => {
    const out = buildUpstreamHeaders(
      { 'x-acquirer-signature': `t=${T},v1=${KNOWN_V1}`, 'x-acquirer-key-id': 'key_ffffffffffffffffffff', 'x_acquirer_signature': 'x', accept: 'application/json' },
      'x-acquirer-id',
      'acq_1',
      'req-1',
    );
    expect(out).toEqual({ accept: 'application/json', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it.each(['X-Acquirer-Signature', 'x-acquirer-key-id', 'X-ACQUIRER-KEY-ID', 'XAcquirerSignature'])('may not be the policy\'s acquirer_header (%s)', (name) => {
    const result = parsePolicy(
      `version: 1\nacquirer_header: ${name}\npermissions:\n  - { name: things_read, description: Read things }\nroutes:\n  - { id: things, method: GET, path: /v1/things, permissions: [things_read] }\n`,
      'p.yaml',
    );
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.errors.map((e) => e.message)).toEqual([expect.stringContaining(`"${name}" is a header the gateway controls`)]);
  });
});
