/**
 * @module
 * An upstream 400 or 422: the client needs to know what was wrong with what it sent (which field, which
 * rule), so the upstream's body is passed on when it is plain JSON of at most 64 KiB that names neither
 * the upstream nor a key; anything else is replaced by the gateway's own body for that status, as
 * every other error is.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { sendError } from '../errors/error-response.js';
import { checkJsonBody, DEFAULT_MAX_DEPTH } from '../net/json-body.js';
import { utf8MediaType } from '../net/media-type.js';
import { revealsUpstream, type UpstreamAddress } from './response-headers.js';

/** An explanation longer than this is not read to the end: the gateway's own body goes instead. */
export const MAX_EXPLANATION_BYTES = 64 * 1024;

const JSON_TYPE = /^application\/(?:[a-z0-9.-]+\+)?json$/;
const NO_TENANT_FIELDS: ReadonlySet<string> = new Set();

/**
 * Reads the upstream's error body and answers with it, or with the gateway's body for `status`.
 * `headers` are the client's response headers as for any answer (buildClientHeaders); its length is
 * set here, from the bytes read.
 */
export function passExplanation(proxyRes: IncomingMessage, res: ServerResponse, status: 400 | 422, headers: OutgoingHttpHeaders, address: UpstreamAddress): void {
  const locals = (res as Response).locals;
  // Replaced: counted and logged as any upstream status the gateway answers for (locals.upstreamStatus).
  const replace = () => {
    locals.upstreamStatus = status;
    sendError(res, status, locals.requestId);
  };
  const mediaType = utf8MediaType(String(proxyRes.headers['content-type'] ?? ''));
  if (mediaType === null || !JSON_TYPE.test(mediaType) || Number(proxyRes.headers['content-length'] ?? 0) > MAX_EXPLANATION_BYTES) {
    proxyRes.resume();
    return replace();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  // Cut short: the upstream's verdict stands, with the gateway's body for it.
  proxyRes.on('error', () => {
    if (!res.headersSent) replace();
  });
  proxyRes.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > MAX_EXPLANATION_BYTES) {
      proxyRes.destroy();
      return replace();
    }
    chunks.push(chunk);
  });
  proxyRes.on('end', () => {
    if (res.headersSent || res.destroyed) return;
    const body = Buffer.concat(chunks, size);
    if (checkJsonBody(body, { maxDepth: DEFAULT_MAX_DEPTH, tenantFields: NO_TENANT_FIELDS }) !== null) return replace();
    // Nor does it tell the client the internal address, or a key, any more than a header may.
    if (revealsUpstream(body.toString('utf8'), address)) return replace();
    res.writeHead(status, { ...headers, 'content-length': String(body.length) });
    res.end(body);
  });
}
