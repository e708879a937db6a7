import http from 'node:http';
import type { GatewayMetrics } from '../observability/metrics.js';

export interface ReadinessCheck {
  readonly policy: 'ok' | 'not_loaded';
  readonly key_store: 'ok' | 'unavailable';
  readonly shutdown: 'no' | 'in_progress';
}

export interface AdminDeps {
  readonly metrics: GatewayMetrics;
  readonly readiness: () => ReadinessCheck;
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
export function createAdminServer({ metrics, readiness }: AdminDeps): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { message: 'Method not allowed' });
    switch (path) {
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => {
            res.writeHead(200, { 'content-type': metrics.registry.contentType, 'cache-control': 'no-store' });
            res.end(text);
          },
          () => json(res, 500, { message: 'Internal server error' }),
        );
        return;
      case '/healthz':
        return json(res, 200, { status: 'ok' });
      case '/readyz': {
        const checks = readiness();
        const ready = checks.policy === 'ok' && checks.key_store === 'ok' && checks.shutdown === 'no';
        return json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks });
      }
      default:
        return json(res, 404, { message: 'Not found' });
    }
  });
}
