/**
 * @module
 * A route's request body: its head judged (media type, declared length) before a byte of it is
 * asked for, then read whole up to the route's limit and checked as JSON before it goes upstream.
 */
import type { Socket } from 'node:net';
import type { Request, Response } from 'express';
import type { ErrorCode } from '../../errors/codes.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { checkJsonBody, DEFAULT_MAX_DEPTH } from '../../net/json-body.js';
import { utf8MediaType } from '../../net/media-type.js';
import { declaresBody } from '../../net/request-body.js';
import type { BodyRule } from '../../policy/compile.js';

/**
 * Refuses a request whose head shows its body cannot be taken: a media type the route does not take
 * (or none, or two Content-Type lines), a transfer coding other than chunked alone, a declared length
 * over the limit. Nothing is read yet.
 */
export function judgeBodyHead(req: Request, rule: BodyRule): void {
  let contentTypes = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === 'content-type') contentTypes++;
  const header = req.headers['content-type'];
  const mediaType = contentTypes === 1 && header !== undefined ? utf8MediaType(header) : null;
  if (mediaType === null || !rule.contentTypes.has(mediaType)) throw new GatewayError('UNSUPPORTED_MEDIA_TYPE');
  // Node undoes chunked framing only: a body also gzip-coded (`gzip, chunked`) would be checked, and
  // sent upstream, as bytes that are not what the client meant.
  const coding = req.headers['transfer-encoding'];
  if (coding !== undefined && coding.trim().toLowerCase() !== 'chunked') throw new GatewayError('BAD_REQUEST');
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > rule.maxBytes) throw new GatewayError('PAYLOAD_TOO_LARGE');
}

/** Requests whose body is being read, by connection: Node's request timeout answers them 408 (bodyTimedOut). */
const reading = new WeakMap<Socket, (code: ErrorCode) => void>();

/**
 * Called when Node's REQUEST_TIMEOUT_MS check finds a request unfinished on `socket`: true when it
 * was a body being read here, which is then refused with 408 (the error handler closes the connection).
 */
export function bodyTimedOut(socket: Socket): boolean {
  const fail = reading.get(socket);
  if (fail === undefined) return false;
  fail('REQUEST_TIMEOUT');
  return true;
}

/**
 * Reads the body whole, refusing it as soon as it passes `maxBytes`. A request that declares none is
 * an empty body (which no JSON check passes). Resolves with the exact bytes the client sent.
 */
export function readBody(req: Request, res: Response, maxBytes: number): Promise<Buffer> {
  if (!declaresBody(req.headers)) return Promise.resolve(Buffer.alloc(0));
  const socket = req.socket;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      reading.delete(socket);
      req.off('data', onData).off('end', onEnd);
      res.off('close', onClose);
    };
    const fail = (code: ErrorCode) => {
      done();
      reject(new GatewayError(code));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) return fail('PAYLOAD_TOO_LARGE');
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(Buffer.concat(chunks, size));
    };
    // The client left mid-body: nobody to answer, and nothing goes upstream.
    const onClose = () => done();
    reading.set(socket, fail);
    req.on('data', onData).on('end', onEnd);
    res.on('close', onClose);
  });
}

/** The body's JSON check (net/json-body.ts), as the refusal it earns, or null when it passes. */
export function bodyRefusal(body: Buffer, tenantFields: ReadonlySet<string>): ErrorCode | null {
  const found = checkJsonBody(body, { maxDepth: DEFAULT_MAX_DEPTH, tenantFields });
  if (found === null) return null;
  return found.problem === 'tenant_field' ? 'TENANT_FIELD' : 'MALFORMED_BODY';
}
