import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { parse } from 'yaml';
import { CONFIG_FIELDS } from '../../src/config/env.js';
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

describe('examples/fleet/', () => {
  const FLEET = 'examples/fleet';
  const read = (file: string) => readFileSync(path.join(FLEET, file), 'utf8');
  const compose = parse(read('docker-compose.yml'));
  const services = compose.services as Record<string, Record<string, any>>;
  const gateways = Object.keys(services).filter((name) => /^gateway-\d+$/.test(name)).sort();
  const sentinels = Object.keys(services).filter((name) => /^sentinel-\d+$/.test(name)).sort();
  const known = new Map(Object.values(CONFIG_FIELDS).map((spec) => [spec.env as string, spec.default]));

  /** A gateway's setting: its environment, else the image's ENV (Dockerfile), else the default. */
  function setting(service: string, name: string): string | undefined {
    const own = services[service]!.environment?.[name];
    if (own !== undefined) return String(own);
    const dockerfile = readFileSync('Dockerfile', 'utf8').replace(/\\\n/g, ' ');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    const image = new Map([...runtime.matchAll(/^ENV (.*)$/gm)].flatMap((m) => [...m[1]!.matchAll(/([A-Z_][A-Z0-9_]*)=(\S+)/g)].map((kv) => [kv[1]!, kv[2]!] as const)));
    return image.get(name) ?? known.get(name);
  }

  /** `source:target[:mode]` of a service's bind mounts, sources as written. */
  const mounts = (service: string) =>
    ((services[service]!.volumes ?? []) as string[]).map((v) => {
      const [source, target, mode] = v.split(':');
      return { source: source!, target: target!, mode };
    });
  const mountOf = (service: string, source: string) => mounts(service).find((m) => m.source === source);

  it('parses, runs every part, and mounts only files that exist', () => {
    expect(Object.keys(services).sort()).toEqual([
      'balancer',
      'gateway-1',
      'gateway-2',
      'grafana',
      'prometheus',
      'redis-primary',
      'redis-replica',
      'sentinel-1',
      'sentinel-2',
      'sentinel-3',
      'statements',
    ]);
    for (const name of [...gateways, 'statements']) expect(path.resolve(FLEET, services[name]!.build.context)).toBe(process.cwd());
    for (const name of Object.keys(services)) {
      for (const { source } of mounts(name)) if (source.startsWith('.')) expect([name, source, existsSync(path.join(FLEET, source))]).toEqual([name, source, true]);
    }
  });

  it('each gateway sets only known settings, finds Redis through the three Sentinels, and trusts the balancer alone', () => {
    expect(gateways).toEqual(['gateway-1', 'gateway-2']);
    const conf = read('sentinel.conf');
    const sentinelPort = conf.match(/^port (\d+)$/m)![1];
    const [, master, primary, primaryPort] = conf.match(/^sentinel monitor (\S+) (\S+) (\d+) \d+$/m)!;
    const balancer = services.balancer!.networks.default.ipv4_address as string;
    for (const name of gateways) {
      const env = services[name]!.environment as Record<string, string>;
      // A misspelt or removed name would be ignored without a word, and its default used.
      expect(Object.keys(env).filter((key) => !known.has(key))).toEqual([]);
      expect(env.UPSTREAM_URL).toBe(`http://statements:${services.statements!.environment.PORT}`);
      expect(env.REDIS_SENTINELS!.split(',').sort()).toEqual(sentinels.map((s) => `${s}:${sentinelPort}`));
      expect(env.REDIS_SENTINEL_NAME).toBe(master);
      expect(env.TRUSTED_PROXIES).toBe(balancer);
      // Prometheus comes from another container: the admin listener must not be on loopback only.
      expect(['0.0.0.0', '::']).toContain(setting(name, 'ADMIN_HOST'));
    }
    // Sentinel's primary is the Redis the replica follows, and both keep every write on disk.
    expect(services[primary!]).toBeDefined();
    expect(services['redis-replica']!.command.join(' ')).toContain(`--replicaof ${primary} ${primaryPort}`);
    for (const name of ['redis-primary', 'redis-replica']) expect(services[name]!.command.join(' ')).toMatch(/--appendonly yes --appendfsync always/);
    // The balancer's fixed address is in the network, outside the range other containers are given.
    const [ipam] = compose.networks.default.ipam.config;
    const address = ipaddr.parse(balancer);
    expect(address.match(ipaddr.parseCIDR(ipam.subnet))).toBe(true);
    expect(address.match(ipaddr.parseCIDR(ipam.ip_range))).toBe(false);
  });

  it('each sentinel runs on a writable copy of the read-only shared config (Sentinel rewrites its file)', () => {
    expect(sentinels).toHaveLength(3);
    for (const name of sentinels) {
      const shared = mountOf(name, './sentinel.conf');
      expect(shared?.mode).toBe('ro');
      const script = (services[name]!.command as string[]).join(' ');
      const copy = script.match(/cp (\S+) (\S+);/);
      expect(copy?.[1]).toBe(shared!.target);
      expect(copy?.[2]).not.toBe(shared!.target);
      expect(script).toContain(`redis-server ${copy![2]} --sentinel`);
    }
  });

  it('nginx balances over both gateways\' public port and passes the client address the gateways believe', () => {
    expect(mountOf('balancer', './nginx.conf')?.target).toBe('/etc/nginx/nginx.conf');
    const conf = read('nginx.conf').replace(/#.*$/gm, '');
    const [, upstream, body] = conf.match(/upstream\s+(\S+)\s*\{([^}]*)\}/)!;
    const servers = [...body!.matchAll(/^\s*server\s+(\S+)/gm)].map((m) => m[1]).sort();
    expect(servers).toEqual(gateways.map((g) => `${g}:${setting(g, 'PORT')}`));
    expect(conf).toMatch(new RegExp(`proxy_pass\\s+http://${upstream};`));
    expect(conf).toMatch(/proxy_set_header\s+X-Forwarded-For\s+(\$remote_addr|\$proxy_add_x_forwarded_for);/);
    const listen = conf.match(/listen\s+(\d+);/)![1];
    expect(services.balancer!.ports).toEqual([`${listen}:${listen}`]);
  });

  it('Prometheus scrapes both gateways\' admin ports, and Grafana shows the dashboard from it', () => {
    const scrape = parse(read('prometheus.yml'));
    expect(mountOf('prometheus', './prometheus.yml')?.target).toBe('/etc/prometheus/prometheus.yml');
    expect(scrape.rule_files).toEqual([mountOf('prometheus', '../alerts.yml')?.target]);
    const targets = scrape.scrape_configs.flatMap((c: { static_configs: { targets: string[] }[] }) => c.static_configs.flatMap((s) => s.targets)).sort();
    expect(targets).toEqual(gateways.map((g) => `${g}:${setting(g, 'ADMIN_PORT')}`));

    const dashboards = parse(read('grafana/dashboards.yml'));
    const dashboard = mountOf('grafana', '../grafana-dashboard.json');
    expect(dashboards.providers.map((p: { options: { path: string } }) => p.options.path)).toEqual([path.posix.dirname(dashboard!.target)]);
    expect(dashboards.providers[0].type).toBe('file');
    expect(mountOf('grafana', './grafana/dashboards.yml')?.target).toMatch(/^\/etc\/grafana\/provisioning\/dashboards\/[^/]+\.yml$/);
    const datasources = parse(read('grafana/datasources.yml')).datasources;
    expect(mountOf('grafana', './grafana/datasources.yml')?.target).toMatch(/^\/etc\/grafana\/provisioning\/datasources\/[^/]+\.yml$/);
    // The dashboard's `datasource` variable takes the default Prometheus.
    expect(datasources).toEqual([expect.objectContaining({ type: 'prometheus', url: 'http://prometheus:9090', isDefault: true })]);
  });
});
