/**
 * @module
 * A small stand-in for the legacy acquirer backend, for `npm start` and for tests: a plain node:http
 * server that trusts the acquirer header the gateway injects and scopes everything by it, as the
 * legacy backend does (given the gateway's signing secret, once the signature checks: sample-signature.ts). It serves the EOD statements, merchant users, merchant payment controls and
 * the audit log; another acquirer's record answers 403 (the shipped policy makes that a 404).
 */
import http from 'node:http';
import { createSampleAuditLog } from './sample-audit-log.js';
import { readJsonBody, refuse, SampleRefusal, sendReply, type SampleReply, type SampleRequest, type SampleRoute } from './sample-http.js';
import { createMerchantDirectory, sampleMerchants, type SampleMerchants } from './sample-merchants.js';
import { merchantUserRoutes } from './sample-merchant-users.js';
import { paymentControlRoutes } from './sample-payment-controls.js';
import { createSignatureCheck } from './sample-signature.js';
import { SAMPLE_PAGE_SIZE, statementRoutes, type SampleStatement } from './sample-statements.js';

export { SAMPLE_PAGE_SIZE, sampleStatements, type SampleStatement } from './sample-statements.js';
export { sampleMerchants, type SampleMerchants } from './sample-merchants.js';
export { PAYMENT_CONTROL_TYPES } from './sample-payment-controls.js';

export interface SampleUpstreamOptions {
  /** The header the gateway stamps the acquirer id in. Default `x-acquirer-id`. */
  readonly acquirerHeader?: string;
  /** EOD statements per page of their list. Default {@link SAMPLE_PAGE_SIZE}. */
  readonly perPage?: number;
  /** Merchant ids per acquirer id. Default: `<acquirer>_m1` and `<acquirer>_m2` for each acquirer of the statements. */
  readonly merchants?: SampleMerchants;
  /** The clock that dates created and changed records and audit entries. Default `() => new Date()`. */
  readonly now?: () => Date;
  /**
   * The gateway's ACQUIRER_SIGNING_SECRET (one secret, or two comma-separated). When given, a request
   * whose `X-Acquirer-Signature` matches none of them, or is more than 300 s from the sample's clock,
   * or that lacks `X-Acquirer-Key-Id`, gets 401 `{"message":"bad signature"}` before anything else.
   */
  readonly signingSecret?: string;
}

/**
 * The sample upstream, not yet listening. Its records live in memory, one set per server.
 *
 * @example
 * const upstream = createSampleUpstream(sampleStatements(['acq_alpha', 'acq_beta']));
 * const port = await listen(upstream, 0, '127.0.0.1');
 * // POST /v1/acquirer/merchants/acq_alpha_m1/users with `x-acquirer-id: acq_alpha` creates a user.
 */
export function createSampleUpstream(statements: readonly SampleStatement[], options: SampleUpstreamOptions = {}): http.Server {
  const { acquirerHeader = 'x-acquirer-id', perPage = SAMPLE_PAGE_SIZE, now = () => new Date() } = options;
  const merchants = createMerchantDirectory(options.merchants ?? sampleMerchants(statements.map((s) => s.acquirerId)));
  const audit = createSampleAuditLog(merchants.merchants);
  const routes: readonly SampleRoute[] = [
    ...statementRoutes(statements, perPage),
    ...merchantUserRoutes(merchants, audit, now),
    ...paymentControlRoutes(merchants, audit, now),
    ...audit.routes,
  ];
  const header = acquirerHeader.toLowerCase();
  const signed = options.signingSecret ? createSignatureCheck(options.signingSecret, header) : undefined;
  return http.createServer(function sampleUpstream(req, res) {
    if (signed !== undefined && !signed(req)) {
      req.resume();
      return sendReply(res, { status: 401, json: { message: 'bad signature' } });
    }
    answer(routes, header, req).then(
      (reply) => sendReply(res, reply),
      (err: unknown) => {
        if (err instanceof SampleRefusal) return sendReply(res, err.reply);
        // A bug of the sample, not of the gateway in front: said where whoever runs it looks.
        process.stderr.write(`sample upstream: ${(err as Error)?.stack ?? String(err)}\n`);
        sendReply(res, { status: 500, json: { message: 'internal error' } });
      },
    );
  });
}

/** The reply to one request: 401 without the acquirer header, then 404 for an unknown path, 405 for a method the path does not take. */
async function answer(routes: readonly SampleRoute[], header: string, req: http.IncomingMessage): Promise<SampleReply> {
  const acquirerId = req.headers[header];
  if (typeof acquirerId !== 'string') return { status: 401, json: { error: 'no acquirer' } };
  const target = req.url ?? '';
  const at = target.indexOf('?');
  const [path, query] = at === -1 ? [target, ''] : [target.slice(0, at), target.slice(at + 1)];
  const [route, captures] = matchRoute(routes, path);
  const method = req.method as keyof SampleRoute['methods'];
  const handler = Object.hasOwn(route.methods, method) ? route.methods[method] : undefined;
  if (handler === undefined) {
    req.resume();
    return { status: 405, json: { message: 'method not allowed' }, headers: { allow: Object.keys(route.methods).join(', ') } };
  }
  const request: SampleRequest = { acquirerId, path, query, params: captures.map(decodeSegment), body: await readJsonBody(req) };
  return handler(request);
}

function matchRoute(routes: readonly SampleRoute[], path: string): [SampleRoute, string[]] {
  for (const route of routes) {
    const match = route.pattern.exec(path);
    if (match) return [route, match.slice(1)];
  }
  throw refuse(404, 'not found');
}

/** A path parameter as its record knows it; one that does not decode names no record. */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw refuse(404, 'not found');
  }
}
