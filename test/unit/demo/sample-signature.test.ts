import http, { type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createSampleUpstream, sampleStatements } from '../../../src/demo/sample-upstream.js';
import { createAcquirerSigner } from '../../../src/proxy/acquirer-signature.js';

/** The sample upstream given the gateway's ACQUIRER_SIGNING_SECRET, as `npm start` gives it. */
const NEW = 'new-secret-0123456789abcdefghijklmnop';
const OLD = 'old-secret-0123456789abcdefghijklmnop';
const LIST = '/v1/acquirer/eod_statements';
const KEY = { id: 'key_0123456789abcdef0123', acquirerId: 'acq_alpha' };
const BAD_SIGNATURE = '{"message":"bad signature"}';

let server: http.Server;
let port: number;

beforeAll(async () => {
  server = createSampleUpstream(sampleStatements(['acq_alpha']), { signingSecret: `${NEW},${OLD}` });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** The gateway's headers for a request, signed `secondsAgo` before now. */
function gatewayHeaders(secrets: string[], path = LIST, { method = 'GET', secondsAgo = 0 } = {}): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { 'x-acquirer-id': KEY.acquirerId };
  createAcquirerSigner(secrets, () => Date.now() - secondsAgo * 1000)!(headers, method, path, KEY);
  return headers;
}

function without(headers: OutgoingHttpHeaders, name: string): OutgoingHttpHeaders {
  const { [name]: _left, ...rest } = headers;
  return rest;
}

function call(path: string, headers: OutgoingHttpHeaders, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the sample upstream with a signing secret', () => {
  it('answers a request the gateway signed with either of its secrets', async () => {
    for (const secrets of [[NEW], [OLD], ['unknown-secret-0123456789abcdefghij', OLD]]) {
      const answer = await call(LIST, gatewayHeaders(secrets));
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).eod_statements).toHaveLength(3);
    }
  });

  it('takes a signature up to 300 s old', async () => {
    expect((await call(LIST, gatewayHeaders([NEW], LIST, { secondsAgo: 290 }))).status).toBe(200);
  });

  it.each([
    ['no signature', { 'x-acquirer-id': 'acq_alpha' }],
    ['another secret', gatewayHeaders(['unknown-secret-0123456789abcdefghij'])],
    ['a signature 400 s old', gatewayHeaders([NEW], LIST, { secondsAgo: 400 })],
    ['a signature 400 s ahead', gatewayHeaders([NEW], LIST, { secondsAgo: -400 })],
    ['no key id', without(gatewayHeaders([NEW]), 'x-acquirer-key-id')],
    ['another key id', { ...gatewayHeaders([NEW]), 'x-acquirer-key-id': 'key_ffffffffffffffffffff' }],
    ['another acquirer', { ...gatewayHeaders([NEW]), 'x-acquirer-id': 'acq_beta' }],
    ['the signature of another path', gatewayHeaders([NEW], `${LIST}?page=2`)],
    ['the signature of another method', gatewayHeaders([NEW], LIST, { method: 'POST' })],
  ])('answers 401 for %s', async (_what, headers) => {
    expect(await call(LIST, headers as OutgoingHttpHeaders)).toEqual({ status: 401, body: BAD_SIGNATURE });
  });

  it('checks before anything else: an unknown path or no acquirer gets the same 401', async () => {
    expect(await call('/no/such/path', gatewayHeaders([NEW]))).toEqual({ status: 401, body: BAD_SIGNATURE });
    expect(await call(LIST, {})).toEqual({ status: 401, body: BAD_SIGNATURE });
  });
});
