import type { RequestHandler, Response } from 'express';
import type { ErrorCode } from '../../errors/codes.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { closeAfterAnswer } from '../../node-internals/outgoing-message.js';

/**
 * Step 0: requests whose framing the gateway and the upstream could read differently are refused
 * before anything else: HTTP/1.1 without Host (Node's own refusal has no body, so the server lets
 * it through to here), more than one Host, protocol upgrades (WebSocket, h2c: the gateway judges
 * requests, not tunnels), HTTP versions other than 1.x, and more than MAX_HEADER_COUNT header lines.
 */
/** More header lines than this is refused with 431 (Node would otherwise drop the excess silently). */
export const MAX_HEADER_COUNT = 100;

/**
 * The refusal closes the connection: bytes that follow a request whose framing was in doubt are not
 * trusted to start the next one. After an Upgrade request in particular, Node's parser reads nothing
 * more, so a request pipelined behind it would wait unanswered until the keep-alive timeout.
 */
function refuse(res: Response, code: ErrorCode): never {
  closeAfterAnswer(res);
  throw new GatewayError(code);
}

export function createRequestGuard(): RequestHandler {
  return function requestGuard(req, res, next) {
    let hosts = 0;
    const raw = req.rawHeaders;
    if (raw.length / 2 > MAX_HEADER_COUNT) refuse(res, 'HEADERS_TOO_LARGE');
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hosts++;
    }
    if (hosts > 1 || (hosts === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1)) refuse(res, 'BAD_REQUEST');
    if (req.headers.upgrade !== undefined) refuse(res, 'BAD_REQUEST');
    // Node's parser lets "HTTP/0.9"-style and "HTTP/2.0" request lines through on an HTTP/1 socket.
    if (req.httpVersionMajor !== 1) refuse(res, 'BAD_REQUEST');
    next();
  };
}
