import http from 'node:http';

export interface ReadinessCheck {
  readonly policy: 'ok' | 'not_loaded';
  readonly key_store: 'ok' | 'unavailable';
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
}

/** The admin listener (not yet listening). */
export type AdminServer = http.Server;

export function isReady(checks: ReadinessCheck): boolean {
  return checks.policy === 'ok' && checks.key_store === 'ok' && checks.shutdown === 'no' && (checks.workers ?? 'ok') === 'ok';
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': bytes.length, 'cache-control': 'no-store' });
  res.end(bytes);
}

/**
 * The operator's listener, apart from the public one (which never answers these paths):
 * `/metrics` for Prometheus, `/healthz` (the process can serve), `/readyz` (it should be sent traffic).
 */
export function createAdminServer({ metrics, readiness }: AdminDeps): AdminServer {
  return http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { message: 'Method not allowed' });
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
  });
}
