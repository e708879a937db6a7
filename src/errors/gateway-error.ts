import { ERROR_CODES, type ErrorCode, type ErrorStatus } from './codes.js';

/** A refusal or failure with a stable code; thrown by plugins, rendered only by the error handler. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: ErrorStatus;
  /** Headers of the answer besides the documented ones (a rate limit's Retry-After and RateLimit). */
  readonly headers: Readonly<Record<string, string>> | undefined;

  constructor(code: ErrorCode, options?: { cause?: unknown; headers?: Readonly<Record<string, string>> }) {
    super(code, options);
    this.name = 'GatewayError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
    this.headers = options?.headers;
  }
}
