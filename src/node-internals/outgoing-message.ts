/**
 * @module
 * Workaround of Node's http.ServerResponse: two of its properties that Node's own code reads and
 * writes, typed by @types/node but not in Node's documentation.
 *
 * Relies on (undocumented): `res.chunkedEncoding` says, once the head is written, whether the body
 * is framed by chunks; `res.shouldKeepAlive = false` before the head makes Node answer
 * `Connection: close` and close the connection after this response, whatever headers are set.
 * Canary: test/unit/node-internals/outgoing-message.test.ts.
 */
import type { ServerResponse } from 'node:http';

/**
 * After `writeHead`: the body ends only when the connection closes (no Content-Length and no chunks,
 * as every streamed answer to an HTTP/1.0 client is), so a close would pass a cut body for whole.
 */
export function bodyFramedByConnection(res: ServerResponse, contentLength: unknown): boolean {
  return !res.chunkedEncoding && contentLength === undefined;
}

/**
 * Before the head: this answer says `Connection: close` and its connection closes after it. Unlike
 * a `Connection` header, this survives the error renderer's removal of every header set earlier.
 */
export function closeAfterAnswer(res: ServerResponse): void {
  res.shouldKeepAlive = false;
}
