import { classifyUpstreamError, UnexpectedUpgradeError, UnsupportedTransferCodingError } from '../../../src/errors/upstream-errors.js';

/** The `kind` label of acquirer_gateway_upstream_errors_total: a closed set, whatever the error. */
describe('classifyUpstreamError', () => {
  const withCode = (code: string) => Object.assign(new Error(code), { code });

  it.each([
    ['ECONNREFUSED', 'refused'],
    ['ECONNRESET', 'reset'],
    ['EPIPE', 'reset'],
    ['ETIMEDOUT', 'timeout'],
    ['ENOTFOUND', 'unresolvable'],
    ['EAI_AGAIN', 'unresolvable'],
    ['HPE_INVALID_CONSTANT', 'protocol'],
    ['ERR_INVALID_CHAR', 'protocol'],
    ['EWHATEVER', 'other'],
  ])('%s → %s', (code, kind) => {
    expect(classifyUpstreamError(withCode(code))).toBe(kind);
  });

  it('an upstream that switched protocols unasked, or sent a coding Node does not undo, is a protocol error, and an error without a code is "other"', () => {
    expect(classifyUpstreamError(new UnexpectedUpgradeError())).toBe('protocol');
    expect(classifyUpstreamError(new UnsupportedTransferCodingError('gzip, chunked'))).toBe('protocol');
    expect(classifyUpstreamError(new Error('no code'))).toBe('other');
    expect(classifyUpstreamError(undefined)).toBe('other');
  });
});
