/**
 * @module
 * The upstream request of an exchange: found in the pool's queue when its deadline passes while it
 * waits for a connection, and watched once it has one.
 */
import type { Agent, ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Response } from 'express';
import { UnexpectedUpgradeError } from '../errors/upstream-errors.js';
import type { Exchange } from './exchange.js';

/**
 * The request header that names an upstream request's exchange while it waits in the pool's queue,
 * taken off in `on.proxyReq` (whose documented use is to change a request's headers before they go
 * out), so the upstream never sees it. http-proxy-middleware forwards headers as given: its job.
 */
export const EXCHANGE_HEADER = 'x-acquirer-gateway-exchange';

/**
 * The exchange's request while it waits in the pool's queue for a connection (Node's documented
 * `agent.requests`), or undefined. Looked for only at a deadline: cancelled there, it gives the
 * pool back the connection it would have been handed, which a request destroyed later would take
 * down with it.
 */
export function queuedRequest(agent: Agent, exchange: Exchange): ClientRequest | undefined {
  for (const queue of Object.values(agent.requests)) {
    for (const req of queue ?? []) if (req.getHeader(EXCHANGE_HEADER) === exchange.id) return req;
  }
  return undefined;
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
  if (!proxyReq.headersSent) proxyReq.removeHeader(EXCHANGE_HEADER);
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
