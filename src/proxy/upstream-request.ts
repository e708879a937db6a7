/**
 * @module
 * The upstream request of an exchange, once it has a connection (http-proxy-middleware's `on.proxyReq`).
 */
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Response } from 'express';
import { UnexpectedUpgradeError } from '../errors/upstream-errors.js';
import type { Exchange } from './exchange.js';

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
  // Answered meanwhile, or its client gone before the request existed to be cancelled (the proxy's
  // engine cancels such a request itself today; this does not rely on it).
  if (exchange.answered || res.closed) return void proxyReq.destroy();
  // The checked body, whole: the client's stream was read to its end, so piping it adds only the end.
  const body = (res as Response).locals.body;
  if (body !== undefined && body.length > 0) proxyReq.write(body);
}
