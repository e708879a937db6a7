import { ERROR_CODES, type ErrorCode, type ErrorStatus } from './codes.js';

/** A refusal or failure with a stable code; thrown by plugins, rendered only by the error handler. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: ErrorStatus;

  constructor(code: ErrorCode, options?: { cause?: unknown }) {
    super(code, options);
    this.name = 'GatewayError';
    this.code = code;
    this.status = ERROR_CODES[code].status;
  }
}
