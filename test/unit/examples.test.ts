import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse } from 'yaml';
import { createMetrics, createPrimaryMetrics } from '../../src/observability/metrics/metrics.js';

/**
 * Docker cannot run here, so the examples are checked for what can be checked: they parse, and every
 * metric they query is one the gateway exports (a renamed metric must not silently blind a dashboard).
 */
async function exportedMetricNames(): Promise<Set<string>> {
  const metrics = createMetrics();
  const names = new Set<string>();
  // A worker's, and with WORKERS above 1 the primary's own process metrics.
  for (const metric of [...(await metrics.registry.getMetricsAsJSON()), ...(await createPrimaryMetrics().collect())]) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_count', '_sum']) names.add(metric.name + suffix);
  }
  return names;
}

function referencedMetrics(expression: string): string[] {
  return [...expression.matchAll(/\bacquirer_gateway_[a-z0-9_]+/g)].map((m) => m[0]);
}

describe('examples/', () => {
  it('the alert rules parse and query only exported metrics', async () => {
    const names = await exportedMetricNames();
    const rules = parse(readFileSync('examples/alerts.yml', 'utf8')).groups.flatMap((g: { rules: { alert: string; expr: string }[] }) => g.rules);
    expect(rules.map((r: { alert: string }) => r.alert)).toEqual(
      expect.arrayContaining([
        'AcquirerGatewayErrorRatioHigh',
        'AcquirerGatewayUpstreamFailures',
        'AcquirerGatewayUpstreamClosesIdleConnections',
        'AcquirerGatewayUpstreamUnaskedAnswer',
        'AcquirerGatewayRedisUnavailable',
        'AcquirerGatewayPolicyReloadFailed',
        'AcquirerGatewayKeyRevocationSlow',
      ]),
    );
    for (const rule of rules) {
      const used = referencedMetrics(rule.expr);
      expect(used.length).toBeGreaterThan(0);
      for (const name of used) expect(names).toContain(name);
    }
  });

  it('every series an alert counts with increase() exists at 0 from the start (Prometheus misses the first step of a new series)', async () => {
    const text = await createMetrics().registry.metrics();
    const rules = parse(readFileSync('examples/alerts.yml', 'utf8')).groups.flatMap((g: { rules: { expr: string }[] }) => g.rules);
    const selectors = rules.flatMap((r: { expr: string }) => [...r.expr.matchAll(/increase\((acquirer_gateway_[a-z0-9_]+)(\{[^}]*\})?\[/g)].map((m) => `${m[1]}${m[2] ?? ''}`));
    expect(selectors).toEqual(['acquirer_gateway_upstream_unasked_bytes_total', 'acquirer_gateway_policy_reloads_total{result="failure"}']);
    for (const selector of selectors) expect(text.split('\n')).toContain(`${selector} 0`);
    for (const kind of ['refused', 'reset', 'timeout', 'pool_exhausted', 'unresolvable', 'protocol', 'stalled', 'other']) {
      expect(text.split('\n')).toContain(`acquirer_gateway_upstream_errors_total{kind="${kind}"} 0`);
    }
  });

  it('the dashboard parses and queries only exported metrics', async () => {
    const names = await exportedMetricNames();
    const dashboard = JSON.parse(readFileSync('examples/grafana-dashboard.json', 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) => p.targets.map((t) => t.expr));
    expect(exprs.length).toBeGreaterThan(10);
    for (const expr of exprs) for (const name of referencedMetrics(expr)) expect(names).toContain(name);
  });

  it('the compose file wires gateway, Redis, the sample service and Prometheus', () => {
    const compose = parse(readFileSync('examples/docker-compose.yml', 'utf8'));
    expect(Object.keys(compose.services).sort()).toEqual(['gateway', 'prometheus', 'redis', 'statements']);
    expect(compose.services.gateway.environment).toMatchObject({ UPSTREAM_URL: 'http://statements:8081', REDIS_URL: 'redis://redis:6379' });
    // The key store keeps every write on disk: a disable Redis forgets would bring the key back.
    expect(compose.services.redis.command.join(' ')).toMatch(/--appendonly yes --appendfsync always/);
    expect(compose.services.redis.volumes).toEqual(['redis-data:/data']);
    expect(Object.keys(compose.volumes)).toEqual(['redis-data']);
    const scrape = parse(readFileSync('examples/prometheus.yml', 'utf8'));
    expect(scrape.scrape_configs[0].static_configs[0].targets).toEqual(['gateway:9090']);
  });

  it('the Dockerfile builds with the README commands, runs as non-root, checks /healthz and runs serve', () => {
    const dockerfile = readFileSync('Dockerfile', 'utf8');
    expect(dockerfile).toMatch(/^FROM node:24-[a-z-]+ AS build$/m);
    expect(dockerfile).toMatch(/RUN npm ci --no-audit --no-fund\n/);
    expect(dockerfile).toMatch(/RUN npm run build\n/);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK .*\n.*\/healthz/m);
    expect(dockerfile).toMatch(/^CMD \["serve"\]$/m);
    // Through the shebang, so the image runs with the same node flags as the installed command.
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/app\/dist\/cli\.js"\]$/m);
    // Which the command imports first: the Node.js version check.
    expect(dockerfile).toMatch(/^COPY scripts\/require-node\.mjs \.\/scripts\/$/m);
  });

  it.each([
    ['127.0.0.2', '127.0.0.2'], // a specific address, as the README advises (the monitoring network's)
    ['0.0.0.0', '0.0.0.0'], // the image's default
    ['::', '::1'],
  ])('the HEALTHCHECK reaches the admin listener at ADMIN_HOST=%s', async (adminHost, listenOn) => {
    const script = JSON.parse(readFileSync('Dockerfile', 'utf8').match(/^\s*CMD (\["node", "-e", .*\])$/m)![1]!) as string[];
    const admin = http.createServer((req, res) => res.writeHead(req.url === '/healthz' ? 200 : 404).end());
    await new Promise<void>((resolve) => admin.listen(0, listenOn, () => resolve()));
    try {
      const env = { ...process.env, ADMIN_HOST: adminHost, ADMIN_PORT: String((admin.address() as AddressInfo).port) };
      const code = await new Promise<number>((resolve) => execFile(process.execPath, script.slice(1), { env }, (err) => resolve(err === null ? 0 : ((err.code as number) ?? 1))));
      expect(code).toBe(0);
    } finally {
      admin.close();
    }
  });
});
