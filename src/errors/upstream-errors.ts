/** How an upstream request failed; a metric label, so a closed set. */
export const UPSTREAM_ERROR_KINDS = ['refused', 'reset', 'timeout', 'pool_exhausted', 'unresolvable', 'protocol', 'stalled', 'other'] as const;
export type UpstreamErrorKind = (typeof UPSTREAM_ERROR_KINDS)[number];

/** A 101 Switching Protocols from the upstream: the gateway never forwards Upgrade, so it asked for none. */
export class UnexpectedUpgradeError extends Error {
  readonly code = 'ERR_UPSTREAM_UNEXPECTED_UPGRADE';
  constructor() {
    super('the upstream switched protocols (101) on a request that asked for no upgrade');
  }
}

/**
 * A transfer coding other than chunked (`gzip, chunked`): Node's parser undoes only the chunking, so
 * the body would reach the client still coded, under a content type that does not say so.
 */
export class UnsupportedTransferCodingError extends Error {
  readonly code = 'ERR_UPSTREAM_TRANSFER_CODING';
  readonly codings: string;
  constructor(codings: string) {
    super('the upstream answered with a transfer coding other than chunked');
    this.codings = codings;
  }
}

/** An answer with more header lines than the gateway reads: Node would have dropped the rest unseen. */
export class TooManyHeaderLinesError extends Error {
  readonly code = 'ERR_UPSTREAM_HEADER_LINES';
  constructor(limit: number) {
    super(`the upstream answered with more than ${limit} header lines`);
  }
}

/** Classifies a socket or parser error from the upstream request. Pure. */
export function classifyUpstreamError(err: unknown): UpstreamErrorKind {
  const code = (err as NodeJS.ErrnoException | undefined)?.code ?? '';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'reset';
  if (code === 'ETIMEDOUT' || code === 'ESOCKETTIMEDOUT') return 'timeout';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'unresolvable';
  if (code.startsWith('HPE_') || code === 'ERR_HTTP_INVALID_STATUS_CODE' || code === 'ERR_INVALID_CHAR' || code === 'ERR_UPSTREAM_UNEXPECTED_UPGRADE' || code === 'ERR_UPSTREAM_TRANSFER_CODING' || code === 'ERR_UPSTREAM_HEADER_LINES') return 'protocol';
  return 'other';
}
