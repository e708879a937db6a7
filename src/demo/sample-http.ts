/**
 * @module
 * The sample upstream's plumbing: what a handler is given and returns, the refusal it throws, the
 * request body read as JSON, and a reply written to the socket. Handlers never see `req`/`res`.
 */
import type http from 'node:http';
import { declaresBody } from '../net/request-body.js';

/** Largest request body the sample reads; the API documents none, and JSON bodies here are small. */
export const SAMPLE_BODY_LIMIT_BYTES = 64 * 1024;

/** A request as a handler sees it: the acquirer stamped by the gateway, decoded path parameters, the parsed body. */
export interface SampleRequest {
  readonly acquirerId: string;
  readonly path: string;
  /** The path's captures, percent-decoded, in the route pattern's order. */
  readonly params: readonly string[];
  /** The query text after `?`, exactly as it arrived (see sample-query.ts to read it). */
  readonly query: string;
  /** The JSON body of a POST or PUT; `undefined` when none was sent. */
  readonly body: unknown;
}

/** What a handler answers: JSON, text (with its own content-type in `headers`), or nothing (204). */
export interface SampleReply {
  readonly status: number;
  readonly json?: unknown;
  readonly text?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

export type SampleHandler = (req: SampleRequest) => SampleReply;

/** One path of the API, the pattern's captures being its parameters, and the methods it takes. */
export interface SampleRoute {
  readonly pattern: RegExp;
  readonly methods: Readonly<Partial<Record<'GET' | 'POST' | 'PUT' | 'DELETE', SampleHandler>>>;
}

/** Thrown anywhere below a handler to answer at once, as a gateway plugin throws its GatewayError. */
export class SampleRefusal extends Error {
  readonly reply: SampleReply;

  constructor(reply: SampleReply) {
    super(`sample upstream refused with ${reply.status}`);
    this.name = 'SampleRefusal';
    this.reply = reply;
  }
}

export const jsonReply = (status: number, json: unknown, headers?: Record<string, string>): SampleReply => ({ status, json, ...(headers ? { headers } : {}) });

/** The API's error body, `{"message": …}`, as a refusal to throw. */
export const refuse = (status: number, message: string): SampleRefusal => new SampleRefusal(jsonReply(status, { message }));

/** A 422 naming each field and what is wrong with it, as the API's validation errors do; `message` defaults to the first problem. */
export function invalid(errors: Readonly<Record<string, readonly string[]>>, message?: string): SampleRefusal {
  const [field, problems] = Object.entries(errors)[0] ?? ['body', ['is invalid']];
  return new SampleRefusal(jsonReply(422, { message: message ?? `Validation failed: ${field} ${problems[0]}`, errors }));
}

/**
 * The body of a POST or PUT parsed as JSON; `undefined` when the request declares none. Refuses a
 * Content-Type other than application/json (415), more than `limit` bytes (413), and unparseable text (400).
 */
export async function readJsonBody(req: http.IncomingMessage, limit = SAMPLE_BODY_LIMIT_BYTES): Promise<unknown> {
  if ((req.method !== 'POST' && req.method !== 'PUT') || !declaresBody(req.headers)) {
    req.resume();
    return undefined;
  }
  const mediaType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (mediaType !== 'application/json') {
    req.resume();
    throw refuse(415, 'Content-Type must be application/json');
  }
  if (Number(req.headers['content-length'] ?? 0) > limit) throw tooLarge(req, limit);
  const text = (await collect(req, limit)).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw refuse(400, 'invalid JSON');
  }
}

function tooLarge(req: http.IncomingMessage, limit: number): SampleRefusal {
  // The rest is read and dropped, not left unread: closing on unread bytes resets the connection,
  // and a client still sending would lose the 413 to the reset.
  req.resume();
  return refuse(413, `request body larger than ${limit} bytes`);
}

/** The body's bytes, or a 413 as soon as they pass `limit` (a chunked body declares no length). */
function collect(req: http.IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      req.off('data', onData);
      reject(tooLarge(req, limit));
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

export function sendReply(res: http.ServerResponse, reply: SampleReply): void {
  const headers: Record<string, string> = { ...reply.headers };
  let payload: string | undefined = reply.text;
  if (payload === undefined && reply.json !== undefined) {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(reply.json);
  }
  res.writeHead(reply.status, headers);
  res.end(payload);
}
