import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';

export interface ReadinessCheck {
  readonly policy: 'ok' | 'not_loaded';
  /** `no_change_notices`: ready, each verdict trusted for 1 s only; `unavailable`: Redis does not answer lookups. */
  readonly key_store: 'ok' | 'no_change_notices' | 'unavailable';
  readonly shutdown: 'no' | 'in_progress';
  /** With WORKERS above 1: every worker is running and answered. */
  readonly workers?: 'ok' | 'missing';
}

export interface MetricsSource {
  readonly contentType: string;
  /** The exposition text: one process's registry, or every worker's, aggregated. */
  text(): Promise<string>;
}

export interface AdminDeps {
  readonly metrics: MetricsSource;
  readonly readiness: () => ReadinessCheck | Promise<ReadinessCheck>;
  /** ADMIN_TOKEN: when not empty, /metrics and /readyz require `Authorization: Bearer <token>`. */
  readonly token?: string | undefined;
  /** The listener's own limits (ADMIN_LIMITS; tests make them shorter). */
  readonly limits?: AdminLimits;
}

/**
 * A scraper and a health check need little: a few connections, a short head, an answer at once.
 * Without limits of its own, idle or half-sent requests to this port could take the process's file
 * descriptors, and every public request would fail until they left.
 */
export interface AdminLimits {
  readonly maxConnections: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
}

export const ADMIN_LIMITS: AdminLimits = { maxConnections: 32, headersTimeoutMs: 5_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 5_000 };

/** The admin listener (not yet listening). */
export type AdminServer = http.Server;

export function isReady(checks: ReadinessCheck): boolean {
  return checks.policy === 'ok' && checks.key_store !== 'unavailable' && checks.shutdown === 'no' && (checks.workers ?? 'ok') === 'ok';
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': bytes.length, 'cache-control': 'no-store' });
  res.end(bytes);
}

/** Whether a request carries the token, compared in constant time (as digests, so lengths do not show). */
function authorized(req: http.IncomingMessage, tokenDigest: Buffer | null): boolean {
  if (tokenDigest === null) return true;
  const header = req.headers.authorization ?? '';
  const given = /^Bearer +(\S+)$/i.exec(header)?.[1] ?? '';
  return timingSafeEqual(createHash('sha256').update(given).digest(), tokenDigest);
}

/**
 * The operator's listener, apart from the public one (which never answers these paths):
 * `/metrics` for Prometheus, `/healthz` (the process can serve), `/readyz` (it should be sent traffic).
 * With a token, `/metrics` and `/readyz` require it; `/healthz` stays open for a container's check.
 */
export function createAdminServer({ metrics, readiness, token, limits = ADMIN_LIMITS }: AdminDeps): AdminServer {
  const tokenDigest = token ? createHash('sha256').update(token).digest() : null;
  const server = http.createServer(
    { headersTimeout: limits.headersTimeoutMs, requestTimeout: limits.requestTimeoutMs, keepAliveTimeout: limits.keepAliveTimeoutMs, connectionsCheckingInterval: 1_000 },
    (req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { message: 'Method not allowed' });
      if ((path === '/metrics' || path === '/readyz') && !authorized(req, tokenDigest)) {
        res.setHeader('www-authenticate', 'Bearer');
        return json(res, 401, { message: 'Invalid authentication information' });
      }
      switch (path) {
        case '/metrics':
          metrics.text().then(
            (text) => {
              res.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
              res.end(text);
            },
            () => json(res, 500, { message: 'Internal server error' }),
          );
          return;
        case '/healthz':
          return json(res, 200, { status: 'ok' });
        case '/readyz':
          Promise.resolve(readiness()).then(
            (checks) => json(res, isReady(checks) ? 200 : 503, { status: isReady(checks) ? 'ready' : 'not_ready', checks }),
            () => json(res, 500, { message: 'Internal server error' }),
          );
          return;
        default:
          return json(res, 404, { message: 'Not found' });
      }
    },
  );
  // Node closes a connection past this as it is accepted: the admin listener is never shared by workers.
  server.maxConnections = limits.maxConnections;
  return server;
}
