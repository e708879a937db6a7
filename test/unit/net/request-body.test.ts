import { declaresBody } from '../../../src/net/request-body.js';

describe('declaresBody', () => {
  it.each([
    [{}, false],
    [{ 'content-length': '0' }, false],
    [{ 'content-length': '00' }, false],
    [{ 'content-length': '000' }, false],
    [{ 'content-length': '5' }, true],
    [{ 'content-length': '05' }, true],
    [{ 'content-length': '10' }, true],
    [{ 'transfer-encoding': 'chunked' }, true],
    [{ 'transfer-encoding': 'identity' }, true],
    [{ 'transfer-encoding': 'chunked', 'content-length': '0' }, true],
  ])('%j → %s', (headers, expected) => {
    expect(declaresBody(headers)).toBe(expected);
  });
});
