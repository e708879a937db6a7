import { memo, MEMO_MAX_TEXT } from '../../../src/net/header-names.js';
import { buildUpstreamHeaders } from '../../../src/proxy/request-headers.js';
import { buildClientHeaders, upstreamAddress } from '../../../src/proxy/response-headers.js';

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
      'req-1',
    );
    expect(out).toEqual({ accept: 'application/json', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
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
        expect: '100-continue',
        'x-request-id': 'client-chosen',
        'user-agent': 'curl/8',
        accept: '*/*',
      },
      'x-acquirer-id',
      'acq_1',
      'req-1',
    );
    expect(out).toEqual({ 'user-agent': 'curl/8', accept: '*/*', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it('drops forwarding claims in every spelling, every X-Forwarded- and X-Original- header, and Proxy', () => {
    const claims = [
      'x_forwarded_for', 'x.forwarded.proto', 'xforwardedhost', 'x-forwarded-ssl', 'x-forwarded-scheme', 'x-forwarded-uri',
      'x-forwarded-path', 'x_original_url', 'x-original-host', 'x-original-method', 'x-http-method_override', 'x_real_ip',
      'proxy', 'client-ip', 'true-client-ip', 'x-cluster-client-ip', 'cf-connecting-ip', 'fastly-client-ip', 'x-host',
      'transfer_encoding', 'keep.alive', 'proxy_authorization',
    ];
    const out = buildUpstreamHeaders({ ...Object.fromEntries(claims.map((n) => [n, 'forged'])), accept: '*/*', 'x-forwardedness': 'kept?' }, 'x-acquirer-id', 'acq_1', 'req-1');
    // 'x-forwardedness' folds to a name that begins with "xforwarded": dropped too, by design.
    expect(out).toEqual({ accept: '*/*', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it('passes only the listed headers: no session, identity, certificate, address or parameter of any other name', () => {
    const dropped = [
      'x_custom', 'x-custom', 'content_length', 'x.custom', 'accept_encoding', 'cookie', 'x-auth-token', 'authentication-info',
      'session', 'x-client-cert', 'x-arr-clientcert', 'ssl-client-cert', 'x-ssl-client-s-dn', 'x-ms-client-principal-name',
      'x-webauth-user', 'x-auth-request-user', 'x-user', 'wl-proxy-client-ip', 'proxy-client-ip', 'x-amzn-oidc-identity',
      'x-goog-authenticated-user-email', 'x-api-key', 'x-tenant-id', 'acquirer-id', 'remote-user', 'x-envoy-original-path',
      'content-length', 'content-type', 'origin', 'referer', 'tracestate', 'baggage',
    ];
    const kept = {
      accept: 'text/csv', 'accept-encoding': 'gzip', 'accept-language': 'et', 'cache-control': 'no-cache', 'if-match': '"e"',
      'if-none-match': '"e"', 'if-modified-since': 'x', 'if-unmodified-since': 'x', 'if-range': '"e"', range: 'bytes=0-9',
      'user-agent': 'curl/8', traceparent: `00-${'4bf92f3577b34da6a3ce929d0e0e4736'}-00f067aa0ba902b7-01`,
    };
    const out = buildUpstreamHeaders({ ...Object.fromEntries(dropped.map((n) => [n, 'forged'])), ...kept }, 'x-acquirer-id', 'acq_1', 'req-1');
    expect(out).toEqual({ ...kept, 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it.each([
    ['free text', 'acquirer_id=acq_1'],
    ['another version', `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01`],
    ['upper-case hex', `00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`],
    ['an all-zero parent id', `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`],
    ['a trailing field', `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01-extra`],
    ['two joined', `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01, 00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`],
  ])('a traceparent not of W3C version 00 (%s) is not passed: the upstream starts a trace of its own', (_, traceparent) => {
    expect(buildUpstreamHeaders({ traceparent, accept: '*/*' }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({ accept: '*/*', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it('a listed header that holds a key, or its random part alone, is not passed: a key goes nowhere Authorization does not', () => {
    const key = `acquirer_key_${'Ab1'.repeat(15)}`;
    const headers = buildUpstreamHeaders(
      { accept: key, 'user-agent': `curl/8 ${key.slice('acquirer_key_'.length)}`, traceparent: `00-${key}-01`, 'accept-language': 'en', host: 'gw' },
      'x-acquirer-id',
      'acq_1',
      'req-1',
    );
    expect(headers).toEqual({ 'accept-language': 'en', 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it("the upstream's own entity tags are sent back in If-None-Match, If-Match and If-Range however they look, but never a whole key", () => {
    const digest = '"LXEWQrcmsEQBYnyp-6wy9chTD7GQPMTbAiWHF5IaSIE"'; // a base64url SHA-256, shaped like a key's random part
    const key = `acquirer_key_${'Ab1'.repeat(15)}`;
    expect(buildUpstreamHeaders({ 'if-none-match': digest, 'if-match': `W/${digest}`, 'if-range': digest }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({
      'if-none-match': digest,
      'if-match': `W/${digest}`,
      'if-range': digest,
      'x-acquirer-id': 'acq_1',
      'x-request-id': 'req-1',
    });
    expect(buildUpstreamHeaders({ 'if-none-match': `"${key}"`, 'if-match': 'redis://u:pw@h' }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({ 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it('an Idempotency-Key passes however random it looks (32 bytes in base64url), but never a whole key', () => {
    const token = 'q3Zt1V8yXkP0bWc9RrLmN2aHdJ6sUeF4oTgYiQ7xK5E'; // 32 random bytes in base64url, shaped like a key's random part
    for (const value of [token, `order-2026-11-28-${token}`, '0e6b4c52-2a0a-4f59-9b0e-5d3c3c9f3a11']) {
      expect(buildUpstreamHeaders({ 'idempotency-key': value }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({ 'idempotency-key': value, 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
    }
    const key = `acquirer_key_${'Ab1'.repeat(15)}`;
    expect(buildUpstreamHeaders({ 'idempotency-key': key }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({ 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });

  it('a listed header the client names in Connection is hop-by-hop: not passed', () => {
    expect(buildUpstreamHeaders({ connection: 'range', range: 'bytes=0-9', accept: '*/*' }, 'x-acquirer-id', 'acq_1', 'req-1')).toEqual({
      accept: '*/*',
      'x-acquirer-id': 'acq_1',
      'x-request-id': 'req-1',
    });
  });

  it('a Connection header cannot nominate the identity header away after it is set', () => {
    const out = buildUpstreamHeaders({ connection: 'x-acquirer-id' }, 'x-acquirer-id', 'acq_1', 'req-1');
    expect(out).toEqual({ 'x-acquirer-id': 'acq_1', 'x-request-id': 'req-1' });
  });
});

describe('buildClientHeaders', () => {
  const ORIGIN = upstreamAddress('http://10.0.0.5:8080');
  const ACQ = 'x-acquirer-id';

  it('passes only the headers a client of the API uses: no hop-by-hop, Connection-nominated, banner, cookie or origin-policy header', () => {
    expect(
      buildClientHeaders(200, {
        'content-type': 'text/csv',
        'content-length': '10',
        etag: '"v1"',
        connection: 'close, x-hop, etag',
        'x-hop': '1',
        'keep-alive': 'timeout=1',
        'transfer-encoding': 'chunked',
        trailer: 'x-checksum',
        upgrade: 'h2c',
        'proxy-authenticate': 'Basic',
        'proxy-authentication-info': 'nextnonce="x"',
        'set-cookie': ['a=1', 'b=2'],
        'set-cookie2': 'c=3',
        'x-request-id': 'from-upstream',
        server: 'legacy/1.0',
        'x-powered-by': 'PHP/5.3',
        'x-aspnet-version': '4.0.30319',
        'x-backend-server': 'app-07',
        via: '1.1 statements-internal-7',
        'strict-transport-security': 'max-age=0',
        'alt-svc': 'h3=":443"',
        'access-control-allow-origin': '*',
        'content-security-policy': "default-src 'none'",
        'www-authenticate': 'Basic realm="legacy"',
      }, 'req-1', ORIGIN, ACQ),
    ).toEqual({ 'content-type': 'text/csv', 'content-length': '10', 'x-request-id': 'req-1' });
  });

  it('passes the representation, its validators, ranges and integrity, caching and retry headers', () => {
    const passed = {
      'content-type': 'text/csv', 'content-length': '10', 'content-encoding': 'gzip', 'content-language': 'en',
      'content-disposition': 'attachment; filename="eod.csv"', 'content-range': 'bytes 0-9/100', 'content-digest': 'sha-256=:AAA=:',
      'repr-digest': 'sha-256=:BBB=:', 'accept-ranges': 'bytes', etag: '"v1"', 'last-modified': 'Tue, 24 Nov 2026 10:00:00 GMT',
      expires: 'Tue, 24 Nov 2026 11:00:00 GMT', age: '5', 'cache-control': 'private, max-age=60', vary: 'Accept-Encoding',
      date: 'Tue, 24 Nov 2026 10:00:05 GMT', 'retry-after': '120', digest: 'sha-256=AAA=', deprecation: '@1796083200',
      sunset: 'Tue, 01 Jun 2027 00:00:00 GMT',
    };
    expect(buildClientHeaders(206, passed, 'r', ORIGIN, ACQ)).toEqual({ ...passed, 'x-request-id': 'r' });
  });

  it.each([
    ['public, max-age=86400', 'private, max-age=86400'],
    ['max-age=60', 'private, max-age=60'],
    ['must-revalidate, max-age=0', 'private, must-revalidate, max-age=0'],
    ['PUBLIC, S-MAXAGE=600, proxy-revalidate, max-age=60', 'private, max-age=60'],
    ['public', 'private'],
    ['private="set-cookie", max-age=60', 'private, max-age=60'],
    ['no-store', 'no-store'],
    ['public, no-store', 'no-store'],
    ['private, max-age=60', 'private, max-age=60'],
    ['no-cache, private', 'no-cache, private'],
    ['max-age=60, , ', 'private, max-age=60'],
    // Commas and directive names inside quoted strings are not directives.
    ['must-revalidate, ext="a,no-store=1", max-age=600, public', 'private, must-revalidate, ext="a,no-store=1", max-age=600'],
    ['private="Set-Cookie, X-Foo", max-age=60', 'private, max-age=60'],
    ['no-cache="x,public=1", must-revalidate, max-age=600', 'private, no-cache="x,public=1", must-revalidate, max-age=600'],
    ['no-cache="a \\" public, b", max-age=5', 'private, no-cache="a \\" public, b", max-age=5'],
    // A quote left open, or one inside a token: the directives cannot be told apart, so none is kept.
    ['ext="unclosed, public', 'private, no-store'],
    ['max-age=0, ext="a, public, s-maxage=86400', 'private, no-store'],
    ['x=a"b, public, s-maxage=1', 'private, x=a"b'],
  ])('Cache-Control %p → %p: no shared cache stores one acquirer\'s answer', (upstream, passed) => {
    expect(buildClientHeaders(200, { 'cache-control': upstream }, 'r', ORIGIN, ACQ)['cache-control']).toBe(passed);
  });

  it.each([
    ['X-Acquirer-Id', 'Authorization'],
    ['Accept-Encoding, x-acquirer-id', 'Accept-Encoding, Authorization'],
    ['Authorization, X-ACQUIRER-ID', 'Authorization'],
    ['Accept', 'Accept'],
    ['*', '*'],
  ])('Vary %p → %p: the answer varies with the key, as the client sees it, not with a header it never sent', (upstream, passed) => {
    expect(buildClientHeaders(200, { vary: upstream }, 'r', ORIGIN, ACQ).vary).toBe(passed);
  });

  it('drops a Content-Length on a 204, which has no body to measure, and keeps it on a 304', () => {
    expect(buildClientHeaders(204, { 'content-length': '5', etag: '"a"' }, 'req-1', ORIGIN, ACQ)).toEqual({ etag: '"a"', 'x-request-id': 'req-1' });
    expect(buildClientHeaders(304, { 'content-length': '5', etag: '"a"' }, 'req-1', ORIGIN, ACQ)).toEqual({ 'content-length': '5', etag: '"a"', 'x-request-id': 'req-1' });
  });

  it.each([
    ['http://10.0.0.5:8080/v1/acquirer/eod_statements?page=2', '/v1/acquirer/eod_statements?page=2'],
    ['HTTP://10.0.0.5:8080/a', '/a'],
    ['http://10.0.0.5:8080', '/'],
    ['http://10.0.0.5:8080?page=2', '/?page=2'],
    ['http://10.0.0.5:8080#frag', '/#frag'],
    ['http://user@10.0.0.5:8080/x', '/x'],
    // Relative, these would name another host; as they are, the upstream: not passed.
    ['http://10.0.0.5:8080//evil.example/a', undefined],
    ['http://10.0.0.5:8080/\\evil.example/a', undefined],
    // The upstream's host on another port or scheme: still its address, not passed.
    ['http://10.0.0.5:80800/a', undefined],
    ['https://10.0.0.5:8080/a', undefined],
    // Forms a URL parser still reads as the upstream's, left as they are: not passed.
    ['http:/\t/10.0.0.5:8080/x', undefined],
    ['http:10.0.0.5:8080/x', undefined],
    // The upstream named anywhere else in it, percent-encoded too: not passed.
    ['/login?next=http://10.0.0.5:8080/v1/x', undefined],
    ['https://storage.example/x?back=http://10.0.0.5:8080/y', undefined],
    ['https://sso.example/login?service=http%3A%2F%2F10.0.0.5%3A8080%2Fcb', undefined],
    // Encoded more often than the decoder's rounds: what it hides cannot be judged, so not passed.
    ['https://sso.example/login?service=http%252525253A%252525252F%252525252F10%252525252E0%252525252E0%252525252E5', undefined],
    ['https://sso.example/login?service=a%2525252541b', undefined],
    ['https://sso.example/login?service=a%25252541b', 'https://sso.example/login?service=a%25252541b'],
    // Other hosts that merely begin like it, and URLs elsewhere: passed as they are.
    ['http://10.0.0.50:8080/a', 'http://10.0.0.50:8080/a'],
    // A name that holds the address shows it all the same: not passed.
    ['http://10.0.0.5.nip.io/a', undefined],
    ['https://storage.example/eod/abc.csv', 'https://storage.example/eod/abc.csv'],
    ['/already/relative', '/already/relative'],
    // Scheme-relative, on the upstream's authority.
    ['//10.0.0.5:8080/v1/x', '/v1/x'],
    ['//10.0.0.5:8080', '/'],
    ['//10.0.0.5:8080//evil.example/a', undefined],
    ['//storage.example/a', '//storage.example/a'],
  ])('Location %s → %s', (location, expected) => {
    expect(buildClientHeaders(302, { location }, 'req-1', ORIGIN, ACQ).location).toBe(expected);
  });

  // A created resource is the upstream's own: kept only on its origin, made relative, as a client would resolve it.
  it.each([
    ['http://10.0.0.5:8080/v1/users/1', '/v1/users/1'],
    ['/v1/users/1?x=1#f', '/v1/users/1?x=1#f'],
    ['users/1', '/users/1'],
    ['https://storage.example/users/1', undefined],
    ['//evil.example/users/1', undefined],
    ['/\t/evil.example/users/1', undefined],
    ['/\\evil.example/users/1', undefined],
    ['https:evil.example/users/1', undefined],
    ['javascript:alert(1)', undefined],
    ['http://[not a host/', undefined],
  ])('a 201 Location %j → %j', (location, expected) => {
    expect(buildClientHeaders(201, { location }, 'req-1', ORIGIN, ACQ).location).toBe(expected);
  });

  it('makes the upstream\'s URLs relative in Content-Location, Refresh and Link too, on any status', () => {
    const headers = buildClientHeaders(200, {
      'content-location': 'http://10.0.0.5:8080/v1/a?page=2',
      refresh: '0; url=http://10.0.0.5:8080/v1/a?page=2',
      link: '<http://10.0.0.5:8080/v1/a?page=3>; rel="next", <https://docs.example/x>; rel="help", <HTTP://10.0.0.5:8080>; rel="start"',
    }, 'req-1', ORIGIN, ACQ);
    expect(headers).toEqual({
      'content-location': '/v1/a?page=2',
      refresh: '0; url=/v1/a?page=2',
      link: '</v1/a?page=3>; rel="next", <https://docs.example/x>; rel="help", </>; rel="start"',
      'x-request-id': 'req-1',
    });
    expect(buildClientHeaders(200, { refresh: '5;URL=\'http://10.0.0.5:8080/b\'' }, 'r', ORIGIN, ACQ).refresh).toBe('5;URL=\'/b\'');
    expect(buildClientHeaders(200, { refresh: '5' }, 'r', ORIGIN, ACQ).refresh).toBe('5');
    expect(buildClientHeaders(200, { refresh: '1; url=http://10.0.0.50:8080/' }, 'r', ORIGIN, ACQ).refresh).toBe('1; url=http://10.0.0.50:8080/');
  });

  it('drops any passed header that holds a key: an upstream that echoes one hands it to nobody', () => {
    const key = `acquirer_key_${'Ab1'.repeat(15)}`;
    expect(
      buildClientHeaders(200, {
        'content-location': `/x?k=${key}`,
        link: `<https://docs.example/${key}>; rel="help"`,
        'content-disposition': `attachment; filename="${key.toUpperCase()}.csv"`,
        'content-type': 'text/csv',
      }, 'r', ORIGIN, ACQ),
    ).toEqual({ 'content-type': 'text/csv', 'x-request-id': 'r' });
  });

  it('passes ETags and file names shaped like a key\'s random part: the upstream is never sent one to echo', () => {
    const upstream = {
      etag: '"LXEWQrcmsEQBYnyp-6wy9chTD7GQPMTbAiWHF5IaSIE"',
      'content-disposition': 'attachment; filename="EOD_Statement_acq_alpha_2026-11-21_Merchant-Settlement.csv"',
    };
    expect(buildClientHeaders(200, upstream, 'r', ORIGIN, ACQ)).toEqual({ ...upstream, 'x-request-id': 'r' });
  });

  it('drops any passed header that names the upstream\'s host, with or without a scheme or port, and only that host', () => {
    expect(
      buildClientHeaders(200, {
        'content-location': '//10.0.0.5:9999/x',
        'content-disposition': 'attachment; filename="eod.csv"; source=10.0.0.5:8080',
        'retry-after': '10.0.0.5.', // a trailing dot is the same name
        'content-language': 'from=10%2E0%2E0%2E5',
        link: '<https://docs.example/10.0.0.50>; rel="help", <https://docs.example/110.0.0.5>; rel="about"', // other addresses
        'content-type': 'application/json',
      }, 'r', ORIGIN, ACQ),
    ).toEqual({ link: '<https://docs.example/10.0.0.50>; rel="help", <https://docs.example/110.0.0.5>; rel="about"', 'content-type': 'application/json', 'x-request-id': 'r' });
    // An upstream named `legacy` (default port): its own URLs with the port written out are made
    // relative; hosts whose names begin or end with "legacy" are others.
    const legacy = upstreamAddress('http://legacy');
    expect(buildClientHeaders(302, { location: 'http://legacy:80/v1/x', link: '<https://legacy-files.example.com/s.csv>; rel="alternate", <https://old.legacy/>; rel="prev"' }, 'r', legacy, ACQ)).toEqual({
      location: '/v1/x',
      link: '<https://legacy-files.example.com/s.csv>; rel="alternate", <https://old.legacy/>; rel="prev"',
      'content-length': '0',
      'x-request-id': 'r',
    });
    expect(buildClientHeaders(200, { 'content-disposition': 'attachment; filename="LEGACY:80"' }, 'r', legacy, ACQ)).toEqual({ 'x-request-id': 'r' });
    // An IPv6 upstream is searched for as it is written in prose and in URLs.
    const v6 = upstreamAddress('http://[fd00::5]:8080');
    expect(buildClientHeaders(200, { 'content-location': 'http://[fd00::5]:9090/x', 'content-disposition': 'fd00::5', link: '<fd00::50>' }, 'r', v6, ACQ)).toEqual({ link: '<fd00::50>', 'x-request-id': 'r' });
    expect(buildClientHeaders(200, { 'content-disposition': 'attachment; filename="db_fd00::5.csv"' }, 'r', v6, ACQ)).toEqual({ 'x-request-id': 'r' });
    // An address between a name's characters is still the address, plain or percent-encoded.
    for (const disposition of ['attachment; filename="from-10.0.0.5.csv"', "attachment; filename*=UTF-8''db%2D10%2E0%2E0%2E5.csv", 'attachment; filename="db_10.0.0.5_x.csv"']) {
      expect(buildClientHeaders(200, { 'content-disposition': disposition }, 'r', ORIGIN, ACQ)).toEqual({ 'x-request-id': 'r' });
    }
    // Part of a longer number it is another address: passed.
    expect(buildClientHeaders(200, { 'content-disposition': 'attachment; filename="1.10.0.0.5-and-10.0.0.5.1.csv"' }, 'r', ORIGIN, ACQ)).toEqual({
      'content-disposition': 'attachment; filename="1.10.0.0.5-and-10.0.0.5.1.csv"',
      'x-request-id': 'r',
    });
  });

  it('drops a Content-Location, Refresh, Link or Location that still names the upstream once rewritten', () => {
    const headers = buildClientHeaders(302, {
      // Sent twice: Node joins the two, and only the first can be made relative.
      'content-location': '/a, http://10.0.0.5:8080/b',
      refresh: '0;url=/a, 5;url=HTTP://10.0.0.5:8080/b',
      link: '</a>; rel="next"; anchor="http://10.0.0.5:8080/anchor"',
      location: 'https://storage.example/x?back=http://10.0.0.5:8080/y',
    }, 'r', ORIGIN, ACQ);
    expect(headers).toEqual({ 'content-length': '0', 'x-request-id': 'r' });
  });

  it('a 205 answers without a body: its length is 0 and its content headers go', () => {
    expect(buildClientHeaders(205, { 'content-type': 'text/plain', 'content-length': '6', etag: '"e"' }, 'r', ORIGIN, ACQ)).toEqual({ etag: '"e"', 'content-length': '0', 'x-request-id': 'r' });
  });

  it.each([300, 301, 302, 303, 307, 308])('a %i answers without a body: its length is 0 and its content headers go', (status) => {
    expect(buildClientHeaders(status, { location: '/a', 'content-type': 'text/html', 'content-length': '120', 'content-encoding': 'gzip', etag: '"e"' }, 'r', ORIGIN, ACQ)).toEqual({
      location: '/a',
      etag: '"e"',
      'content-length': '0',
      'x-request-id': 'r',
    });
  });
});

describe('mapUpstreamStatus', () => {
  it.each([
    [200, null], [204, null], [206, null], [302, null], [304, null],
    // An upstream 401 is never passed on: the gateway's 401 is about the client's key, which the upstream never sees.
    [400, 400], [401, 502], [403, 404], [404, 404], [405, 502], [418, 502], [429, 502], [431, 431],
    [500, 500], [501, 502], [502, 502], [503, 503], [504, 504], [599, 502],
    [99, 502], [100, 502], [101, 502], [199, 502], [600, 502], [999, 502],
  ])('upstream %i → %p', async (upstream, expected) => {
    const { mapUpstreamStatus } = await import('../../../src/errors/upstream-status.js');
    // The map without 401, as the schema's default is (the shipped policy lists 401: 502).
    expect(mapUpstreamStatus(upstream, new Map([[403, 404], [404, 404]]))).toBe(expected);
    // A map that a policy cannot hold (compile refuses it) changes nothing for a 401 either.
    if (upstream === 401) expect(mapUpstreamStatus(upstream, new Map([[401, 503]]))).toBe(502);
  });
});

describe('memo', () => {
  it('remembers short texts, within its count, and never a long one: no client chooses what it holds', () => {
    const calls: string[] = [];
    const lengthOf = memo((text: string) => (calls.push(text), text.length), 2);
    const [short, long] = ['keep-alive', 'x'.repeat(MEMO_MAX_TEXT + 1)];
    expect([lengthOf(short), lengthOf(short), lengthOf(long), lengthOf(long)]).toEqual([short.length, short.length, long.length, long.length]);
    expect(calls).toEqual([short, long, long]);
    // Full: it starts over, and works out again what it let go.
    lengthOf('a');
    lengthOf('b');
    lengthOf(short);
    expect(calls).toEqual([short, long, long, 'a', 'b', short]);
  });
});
