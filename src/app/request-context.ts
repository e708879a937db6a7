import type { ErrorCode } from '../errors/codes.js';
import type { ResolvedKey } from '../keys/key-resolver.js';
import type { CompiledPolicy, CompiledRoute } from '../policy/compile.js';

/** What the pipeline learns about a request, step by step, kept on `res.locals`. */
declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Locals {
      /** The policy this request is judged by, fixed when it arrives (a reload does not change it mid-way). */
      policy: CompiledPolicy;
      /** The gateway's own (a UUID), whatever the client sent; sent upstream and back. */
      requestId: string;
      /** performance.now() when the request arrived (ms, monotonic). */
      startedAt: number;
      /** The client address as judged (socket peer or trusted-proxy walk), once computed. */
      clientAddress?: string | null;
      /** Milliseconds until the upstream's response headers arrived. */
      upstreamMs?: number;
      upstreamErrorKind?: import('../errors/upstream-errors.js').UpstreamErrorKind;
      key?: ResolvedKey;
      route?: CompiledRoute;
      /** Set when the request was refused or failed; for logs and metrics. */
      errorCode?: ErrorCode;
      /** The request body, read whole and checked (routes that declare one). */
      body?: Buffer;
      /** The size of the body read whole, whether its check then passed or refused it. */
      bodyBytes?: number;
      /** The upstream exchange in progress, once the request is forwarded. */
      upstream?: import('../proxy/exchange.js').Exchange;
      /** Set when the upstream's status was replaced by a gateway error. */
      upstreamStatus?: number;
      /** The RateLimit fields for an answer the key's budget allowed (plugins/rate-limit). */
      rateLimitHeaders?: Readonly<Record<string, string>>;
    }
  }
}

/** Every field of the request's locals, each one required: the factory below must list them all. */
type AllLocals = { [K in keyof Required<Express.Locals>]: Express.Locals[K] | undefined };

/**
 * A request's locals, every field present from the start and in the same order, so all requests'
 * locals share one shape (Express's own `res.locals` is a hash table to V8: the figure is in
 * docs/performance.md). A field added to `Locals` above must be added here, or this does not compile.
 */
export function createRequestLocals(policy: CompiledPolicy, requestId: string, startedAt: number): Express.Locals {
  const locals: AllLocals = {
    policy,
    requestId,
    startedAt,
    clientAddress: undefined,
    upstreamMs: undefined,
    upstreamErrorKind: undefined,
    key: undefined,
    route: undefined,
    errorCode: undefined,
    body: undefined,
    bodyBytes: undefined,
    upstream: undefined,
    upstreamStatus: undefined,
    rateLimitHeaders: undefined,
  };
  return locals as Express.Locals;
}
