import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { declaresBody } from '../net/request-body.js';
import { closeAfterAnswer } from '../node-internals/outgoing-message.js';
import { STATUS_MESSAGES, type ErrorStatus } from './codes.js';

const CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * A 401 names the scheme to authenticate with (RFC 9110 §11.6.1 requires the header), and nothing
 * more: no `error="invalid_token"`, so a missing, unknown, disabled and out-of-whitelist key answer alike.
 */
const CHALLENGE = { 'www-authenticate': 'Bearer' };

/** A 429 says when to try again (RFC 6585 §4): the requests it waits for are usually done by then; a rate limit's says its own. */
const RETRY_AFTER = { 'retry-after': '1' };

/** Precomputed once: the exact bytes and headers for each error status. */
const RESPONSES = new Map<number, { body: Buffer; headers: Record<string, string> }>(
  Object.entries(STATUS_MESSAGES).map(([status, message]) => {
    const body = Buffer.from(JSON.stringify({ message }));
    const headers = { 'content-type': CONTENT_TYPE, 'content-length': String(body.length) };
    return [Number(status), { body, headers: status === '401' ? { ...headers, ...CHALLENGE } : status === '429' ? { ...headers, ...RETRY_AFTER } : headers }];
  }),
);

/** The documented body for a status, as the client receives it. */
export function errorBody(status: ErrorStatus): Buffer {
  return RESPONSES.get(status)!.body;
}

/**
 * Writes the documented error response for `status`, with the request's id, and `extra` headers (a
 * 416's `Content-Range`, a rate limit's `Retry-After` and `RateLimit`). The only place an error
 * becomes bytes on the wire: any header set earlier on `res` is dropped, so a response is identical
 * whoever produced it.
 * When the headers already went out (a failure mid-stream), the connection is cut instead
 * (cutResponse), so the client sees a truncated response rather than a silently short one.
 */
export function sendError(res: ServerResponse, status: ErrorStatus, requestId: string, extra?: Readonly<Record<string, string>>): void {
  if (res.headersSent) {
    cutResponse(res);
    return;
  }
  const response = RESPONSES.get(status)!;
  // A body that has not all arrived (no route takes one): rather than read all of it to find where
  // the next request starts, which could be gigabytes a client sends as slowly as it likes, the
  // answer says `Connection: close` and Node closes the connection after it. (A request that
  // declares a body is judged a turn after its head, so one that came in the same read is whole.)
  const req = res.req as ServerResponse['req'] | undefined;
  if (req !== undefined && !req.complete && declaresBody(req.headers)) closeAfterAnswer(res);
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  const headers = { ...response.headers, 'x-request-id': requestId };
  res.writeHead(status, extra === undefined ? headers : { ...headers, ...extra });
  res.end(response.body);
}

const ENDS_WITH_CONNECTION = Symbol('its body ends when its connection closes');
type CuttableResponse = ServerResponse & { [ENDS_WITH_CONNECTION]?: true };

/**
 * Marks a response, its head out, whose body is framed by nothing but its connection: no
 * Content-Length and no chunks, as every streamed answer to an HTTP/1.0 client is.
 */
export function noteBodyEndsWithConnection(res: ServerResponse): void {
  (res as CuttableResponse)[ENDS_WITH_CONNECTION] = true;
}

/**
 * Ends a response whose head is out, short of its body, so that no client can take it for whole.
 * Framed by Content-Length or chunks, a closed connection shows the body short. Framed by the
 * connection alone (noteBodyEndsWithConnection), a close would be its end, and a cut download would
 * look complete: that connection is reset instead. Only that one: a reset also throws away what is
 * still on its way to the client, a whole earlier answer on the connection included.
 */
export function cutResponse(res: ServerResponse): void {
  const socket = res.socket;
  if ((res as CuttableResponse)[ENDS_WITH_CONNECTION] === true && socket !== null && !socket.destroyed) {
    try {
      socket.resetAndDestroy();
    } catch {
      socket.destroy(); // not a TCP socket (a test's stream): a close is all there is
    }
  }
  res.destroy();
}

/**
 * Closes a connection, cutting the answer under way on it (`underWay`, the oldest it owes), if any,
 * as cutResponse cuts one: never a close that would end a body framed only by its connection.
 */
export function cutConnection(socket: Duplex, underWay: ServerResponse | undefined): void {
  if (underWay?.headersSent === true) return void cutResponse(underWay);
  socket.destroy();
}

/**
 * For failures before Express sees the request (Node's HTTP parser refused it): the same body and
 * content type as every other error of that status, written raw, and the connection closed since
 * the parser cannot say where the next request would start.
 */
export function sendRawError(socket: Duplex, status: ErrorStatus, requestId: string, underWay: ServerResponse | undefined): void {
  // The answer under way on this connection has begun (its request's body was malformed mid-way):
  // an error written now would land inside its body. Cutting keeps the truncation visible. (One owed
  // for an earlier request the caller does not answer this way at all.)
  if (underWay?.headersSent === true || !socket.writable) {
    cutConnection(socket, underWay);
    return;
  }
  const { body, headers } = RESPONSES.get(status)!;
  const head =
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    `content-type: ${headers['content-type']}\r\ncontent-length: ${headers['content-length']}\r\n` +
    `x-request-id: ${requestId}\r\nDate: ${new Date().toUTCString()}\r\nConnection: close\r\n\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
}
