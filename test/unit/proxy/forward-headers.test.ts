import { buildClientHeaders, buildUpstreamHeaders } from '../../../src/proxy/forward-headers.js';

describe('buildUpstreamHeaders', () => {
  it('drops every client spelling of the identity header and sets it once from the key', () => {
    const out = buildUpstreamHeaders(
      {
        'x-acquirer-id': 'evil',
        'x_acquirer_id': 'evil',
        'x.acquirer.id': 'evil',
        'xacquirerid': 'evil',
        'x-acquirer_id': 'evil',
        accept: 'application/json',
      },
      'x-acquirer-id',
      'acq_1',
    );
    expect(out).toEqual({ accept: 'application/json', 'x-acquirer-id': 'acq_1' });
  });

  it('drops the credential, hop-by-hop headers, forwarding claims and overrides', () => {
    const out = buildUpstreamHeaders(
      {
        authorization: 'Bearer x',
        connection: 'keep-alive, x-secret-hop',
        'keep-alive': 'timeout=5',
        'x-secret-hop': 'a',
        te: 'trailers',
        trailer: 'x',
        'transfer-encoding': 'chunked',
        upgrade: 'websocket',
        'proxy-authorization': 'Basic x',
        'proxy-connection': 'keep-alive',
        forwarded: 'for=1.2.3.4',
        'x-forwarded-for': '1.2.3.4',
        'x-forwarded-host': 'evil',
        'x-forwarded-proto': 'https',
        'x-real-ip': '1.2.3.4',
        'x-original-url': '/admin',
        'x-rewrite-url': '/admin',
        'x-http-method-override': 'DELETE',
        'user-agent': 'curl/8',
        accept: '*/*',
      },
      'x-acquirer-id',
      'acq_1',
    );
    expect(out).toEqual({ 'user-agent': 'curl/8', accept: '*/*', 'x-acquirer-id': 'acq_1' });
  });

  it('a Connection header cannot nominate the identity header away after it is set', () => {
    const out = buildUpstreamHeaders({ connection: 'x-acquirer-id' }, 'x-acquirer-id', 'acq_1');
    expect(out).toEqual({ 'x-acquirer-id': 'acq_1' });
  });
});

describe('buildClientHeaders', () => {
  it('passes upstream headers except hop-by-hop and Connection-nominated ones', () => {
    expect(
      buildClientHeaders({
        'content-type': 'text/csv',
        'content-length': '10',
        connection: 'close, x-hop',
        'x-hop': '1',
        'keep-alive': 'timeout=1',
        'transfer-encoding': 'chunked',
        'set-cookie': ['a=1', 'b=2'],
      }),
    ).toEqual({ 'content-type': 'text/csv', 'content-length': '10', 'set-cookie': ['a=1', 'b=2'] });
  });
});
