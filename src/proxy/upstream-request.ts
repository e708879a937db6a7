/**
 * @module
 * The upstream request of an exchange: linked to it as soon as the pool is handed the request (so
 * that its deadline can take it out of the pool's queue), and watched once it has a connection.
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Response } from 'express';
import { UnexpectedUpgradeError } from '../errors/upstream-errors.js';
import type { Exchange } from './exchange.js';

/**
 * The request header that carries an exchange's id from the proxy to the pool, where it is taken off
 * before anything is sent: the way http-proxy-middleware forwards headers is its documented job.
 */
export const EXCHANGE_HEADER = 'x-acquirer-gateway-exchange';

/** Exchanges whose upstream request the pool has not been handed yet, by id. */
export class ExchangeLinks {
  readonly #waiting = new Map<string, Exchange>();
  #sequence = 0;

  /** A new exchange's id. */
  nextId(): string {
    return String(++this.#sequence);
  }

  /** Before the exchange's request is (re)sent. */
  expect(exchange: Exchange): void {
    this.#waiting.set(exchange.id, exchange);
  }

  /** The exchange is over, whether or not its request was ever made. */
  forget(exchange: Exchange): void {
    this.#waiting.delete(exchange.id);
  }

  /** The pool's hook (UpstreamAgent `onRequest`): each request as it is created, before a connection. */
  readonly onRequest = (req: ClientRequest): void => {
    const id = req.getHeader(EXCHANGE_HEADER);
    if (typeof id !== 'string' || req.headersSent) return;
    req.removeHeader(EXCHANGE_HEADER);
    const exchange = this.#waiting.get(id);
    if (exchange === undefined) return;
    this.#waiting.delete(id);
    exchange.proxyReq = req;
  };
}

/**
 * http-proxy-middleware's `on.proxyReq`: the request has a connection (or is about to). `onFailure`
 * is the proxy's error handler, for an answer the gateway never asked for (`101 Switching Protocols`).
 */
export function onUpstreamRequest(
  proxyReq: ClientRequest,
  req: IncomingMessage,
  res: ServerResponse,
  onFailure: (err: Error, req: IncomingMessage, res: ServerResponse) => void,
): void {
  const exchange = (res as Response).locals.upstream;
  if (exchange === undefined) return;
  exchange.proxyReq = proxyReq;
  if (proxyReq.socket !== null) exchange.bytesReadAtStart = proxyReq.socket.bytesRead;
  else proxyReq.once('socket', (socket: Socket) => (exchange.bytesReadAtStart = socket.bytesRead));
  // Upgrade is never forwarded, so a 101 answers nothing the gateway asked. With no listener,
  // Node closes the connection without an error, and the client would wait for the 504.
  proxyReq.on('upgrade', (_upgraded: IncomingMessage, socket: Socket) => {
    socket.destroy();
    onFailure(new UnexpectedUpgradeError(), req, res);
  });
  // Answered meanwhile (a request cancelled in the pool's queue never gets here).
  if (exchange.answered) proxyReq.destroy();
}
