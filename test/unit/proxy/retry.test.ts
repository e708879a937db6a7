import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Response } from 'express';
import { Exchange } from '../../../src/proxy/exchange.js';
import { retriable } from '../../../src/proxy/retry.js';

/**
 * When a failed upstream request may be sent again: only a GET or HEAD whose pooled connection failed
 * with a reset before one byte of an answer, once, with the client still there and no answer decided.
 */
const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

function attempt(overrides: { method?: string; reusedSocket?: boolean; bytesRead?: number; clientGone?: boolean; retried?: boolean; answered?: boolean; noRequest?: boolean } = {}) {
  const proxyReq = { reusedSocket: overrides.reusedSocket ?? true, socket: { bytesRead: overrides.bytesRead ?? 120 } } as unknown as ClientRequest;
  const state = new Exchange('1', {} as Response, () => {}, 0);
  state.proxyReq = overrides.noRequest ? undefined : proxyReq;
  state.answered = overrides.answered ?? false;
  state.bytesReadAtStart = 120;
  state.retried = overrides.retried ?? false;
  const req = { method: overrides.method ?? 'GET', socket: { destroyed: overrides.clientGone ?? false } } as unknown as IncomingMessage;
  return { req, state };
}

describe('retriable', () => {
  it.each([
    ['GET on a reused connection, reset before any answer', {}, reset, true],
    ['HEAD, the same', { method: 'HEAD' }, reset, true],
    ['a broken pipe while sending', {}, Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }), true],
    ['POST', { method: 'POST' }, reset, false],
    ['PUT', { method: 'PUT' }, reset, false],
    ['DELETE', { method: 'DELETE' }, reset, false],
    ['PATCH', { method: 'PATCH' }, reset, false],
    ['a new connection', { reusedSocket: false }, reset, false],
    ['after the first bytes of an answer', { bytesRead: 140 }, reset, false],
    ['a second time', { retried: true }, reset, false],
    ['once the answer is decided (timed out, or headers in)', { answered: true }, reset, false],
    ['after the client left', { clientGone: true }, reset, false],
    ['before the request had a connection', { noRequest: true }, reset, false],
    ['connection refused', {}, Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), false],
    ['a timeout', {}, Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }), false],
    ['a parse error', {}, Object.assign(new Error('Parse Error'), { code: 'HPE_INVALID_CONSTANT' }), false],
  ])('%s → %s', (_name, overrides, err, expected) => {
    const { req, state } = attempt(overrides);
    expect(retriable(err, req, state)).toBe(expected);
  });
});
