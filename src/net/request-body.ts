import type { IncomingHttpHeaders } from 'node:http';

/**
 * Whether a request's head says a body follows: any `Transfer-Encoding` (even a chunked body that
 * turns out empty: nothing waits for the body to find out), or a `Content-Length` other than zero,
 * however many digits spell the zero (RFC 9110 §8.6). Node's parser has refused any other length.
 */
export function declaresBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && !/^0+$/.test(length);
}
