/**
 * @module
 * The upstream's answer on its way to the client: refused when the gateway cannot pass it on
 * faithfully, an error status replaced by the gateway's own answer, otherwise its allowed headers
 * and its body, streamed with backpressure.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Response } from 'express';
import { noteBodyEndsWithConnection, sendError } from '../errors/error-response.js';
import { TooManyHeaderLinesError, UnsupportedTransferCodingError } from '../errors/upstream-errors.js';
import { EXPLAINED_STATUSES, mapUpstreamStatus } from '../errors/upstream-status.js';
import { bodyFramedByConnection } from '../node-internals/outgoing-message.js';
import type { Logger } from '../observability/logger/logger.js';
import type { ExchangeWatch } from './exchange.js';
import { fail, failAnswer } from './failures.js';
import { passExplanation } from './error-body.js';
import { forwardBody } from './forward-body.js';
import { buildClientHeaders, hasDroppedBody, unsatisfiedRange, type UpstreamAddress } from './response-headers.js';
import { MAX_UPSTREAM_HEADER_LINES } from './upstream-agent.js';

export interface AnswerContext {
  readonly logger: Logger;
  readonly address: UpstreamAddress;
  readonly watch: ExchangeWatch;
  /** Counts a streamed body towards a young-generation collection (streamed-memory.ts), if on. */
  readonly watchStreamedBody: ((body: IncomingMessage) => void) | undefined;
}

/** The one transfer coding Node's parser undoes (any other reaches the client still coded). */
const ONLY_CHUNKED = /^[ \t]*chunked[ \t]*$/i;

/** Error bodies are drained so the keep-alive connection survives, but only this much and this long. */
const DISCARD_MAX_BYTES = 64 * 1024;
const DISCARD_MAX_MS = 1000;

/** http-proxy-middleware's `on.proxyRes`: the upstream's headers have arrived. */
export function passAnswer(proxyRes: IncomingMessage, res: ServerResponse, ctx: AnswerContext): void {
  const locals = (res as Response).locals;
  const exchange = locals.upstream;
  if (exchange === undefined || exchange.answered) return void proxyRes.destroy();
  exchange.answered = true;
  locals.upstreamMs = ctx.watch.now() - exchange.startedAt;
  const status = proxyRes.statusCode ?? 502;
  const unusable = unusableAnswer(proxyRes, status);
  if (unusable !== null) {
    proxyRes.destroy();
    locals.upstreamErrorKind = 'protocol';
    return fail(res, 'UPSTREAM_UNREACHABLE', ctx.logger, unusable);
  }
  if (EXPLAINED_STATUSES.has(status) && !locals.policy.upstreamStatusMap.has(status)) {
    exchange.proxyRes = proxyRes;
    ctx.watch.streaming(exchange);
    return passExplanation(proxyRes, res, status as 400 | 422, clientHeaders(status, proxyRes, locals, ctx), ctx.address);
  }
  const mapped = mapUpstreamStatus(status, locals.policy.upstreamStatusMap);
  if (mapped !== null) {
    discard(proxyRes);
    locals.upstreamStatus = status;
    // A 416 says how long the representation is (RFC 9110 §15.5.17), so the client can ask again.
    const range = mapped === 416 ? unsatisfiedRange(proxyRes.headers) : undefined;
    return sendError(res, mapped, locals.requestId, range === undefined ? undefined : { 'content-range': range });
  }
  const headers = clientHeaders(status, proxyRes, locals, ctx);
  // Written with the body's first byte or its end (forwardBody), not now: Node would hold the head
  // back until then anyway, and an upstream that fails before it can still be answered 502.
  const writeHead = (): boolean => {
    try {
      res.writeHead(status, headers);
    } catch (err) {
      // Headers Node will not send on (e.g. invalid characters): the answer is unusable, not fatal.
      proxyRes.destroy();
      fail(res, 'UPSTREAM_UNREACHABLE', ctx.logger, err);
      return false;
    }
    if (bodyFramedByConnection(res, headers['content-length'])) noteBodyEndsWithConnection(res);
    return true;
  };
  if (hasDroppedBody(status)) {
    discard(proxyRes);
    if (writeHead()) res.end();
    return;
  }
  streamBody(proxyRes, res, writeHead, ctx);
}

/** The upstream's headers the client gets, with the key's RateLimit fields when its budget was judged. */
function clientHeaders(status: number, proxyRes: IncomingMessage, locals: Express.Locals, ctx: AnswerContext): OutgoingHttpHeaders {
  const headers = buildClientHeaders(status, proxyRes.headers, locals.requestId, ctx.address, locals.policy.acquirerHeader);
  return locals.rateLimitHeaders === undefined ? headers : Object.assign(headers, locals.rateLimitHeaders);
}

/**
 * Why an answer cannot be passed on as it is, or null: more header lines than Node read (it dropped
 * the rest unseen while its parser acted on them), or a transfer coding other than chunked where a
 * body is passed (Node undoes only the chunks: the client would get coded bytes).
 */
function unusableAnswer(proxyRes: IncomingMessage, status: number): Error | null {
  if (proxyRes.rawHeaders.length > 2 * MAX_UPSTREAM_HEADER_LINES) return new TooManyHeaderLinesError(MAX_UPSTREAM_HEADER_LINES);
  const codings = proxyRes.headers['transfer-encoding'];
  if (codings === undefined || ONLY_CHUNKED.test(codings) || passesNoBody(status)) return null;
  return new UnsupportedTransferCodingError(codings);
}

/** Statuses whose body is never passed on: an error (replaced), a redirect's or 205's (dropped), a 204's or 304's (none). */
function passesNoBody(status: number): boolean {
  return status >= 400 || status < 200 || hasDroppedBody(status) || status === 204 || status === 304;
}

function streamBody(proxyRes: IncomingMessage, res: ServerResponse, writeHead: () => boolean, ctx: AnswerContext): void {
  // Cut after the headers (Node reports a body cut short as an error): an upstream failure, not a
  // success. Prepended, so the client is cut before anything else closes its connection, which an
  // HTTP/1.0 client would take for the end of the body. (A client that left destroys the answer
  // without an error: not the upstream's failure.)
  proxyRes.prependListener('error', (err) => {
    if (proxyRes.complete) return; // whole: what failed came after it (upstream-error.ts)
    failAnswer(res, err, 'reset', ctx.logger);
  });
  const exchange = (res as Response).locals.upstream!;
  exchange.proxyRes = proxyRes;
  ctx.watch.streaming(exchange);
  forwardBody(proxyRes, res, writeHead);
  ctx.watchStreamedBody?.(proxyRes);
}

/**
 * Throws away an upstream body the client will never see. A small one is read to the end so its
 * connection can be reused; a large, slow or endless one is cut, so it cannot hold a pooled socket.
 */
function discard(body: IncomingMessage): void {
  let bytes = 0;
  const timer = setTimeout(() => body.destroy(), DISCARD_MAX_MS);
  timer.unref();
  body.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > DISCARD_MAX_BYTES) body.destroy();
  });
  body.once('close', () => clearTimeout(timer));
  body.on('error', () => {});
  body.resume();
}
