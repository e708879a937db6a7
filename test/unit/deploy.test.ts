import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { createAdminServer, type ReadinessCheck } from '../../src/admin/admin-server.js';
import { DEFAULT_POLICY_FILE } from '../../src/config/defaults.js';
import { CONFIG_FIELDS } from '../../src/config/env.js';

/**
 * deploy/kubernetes/ against the gateway: what the manifests say must be what the gateway does
 * (its ports, settings, endpoints, shutdown), or a rollout fails in ways no cluster is here to show.
 */
const DIR = 'deploy/kubernetes';

// Manifests are YAML of any shape: each test names the fields it relies on.
type Json = any;

interface Manifest {
  readonly file: string;
  readonly object: Json;
}

function manifests(): Manifest[] {
  const found: Manifest[] = [];
  for (const file of readdirSync(DIR).filter((f) => /\.ya?ml$/.test(f)).sort()) {
    for (const doc of parseAllDocuments(readFileSync(path.join(DIR, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const object = doc.toJS();
      if (object !== null) found.push({ file, object });
    }
  }
  return found;
}

const all = manifests();

function one(kind: string): Json {
  const objects = all.filter((m) => m.object.kind === kind);
  if (objects.length !== 1) throw new Error(`expected one ${kind} in ${DIR}, found ${objects.length}`);
  return objects[0]!.object;
}

const deployment = one('Deployment');
const pod = deployment.spec.template;
const container = pod.spec.containers[0];

/** The image's ENV (Dockerfile): what the container has where the Deployment sets nothing. */
function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync('Dockerfile', 'utf8').replace(/\\\n/g, ' ');
  const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const env: Record<string, string> = {};
  for (const line of runtime.split('\n').filter((l) => l.startsWith('ENV '))) {
    for (const [, name, value] of line.slice(4).matchAll(/([A-Z_][A-Z0-9_]*)=(\S+)/g)) env[name!] = value!;
  }
  return env;
}

const knownSettings = new Map(Object.values(CONFIG_FIELDS).map((spec) => [spec.env as string, spec.default]));

/** A setting as the container sees it: the Deployment's value, else the image's, else the gateway's default. */
function setting(name: string): string | undefined {
  const entry = (container.env ?? []).find((e: Json) => e.name === name);
  if (entry !== undefined) {
    if (typeof entry.value !== 'string') throw new Error(`${name} is not a literal value in the Deployment`);
    return entry.value;
  }
  const fromImage = imageEnv()[name];
  if (fromImage !== undefined) return fromImage;
  if (!knownSettings.has(name)) throw new Error(`${name} is not a setting`);
  return knownSettings.get(name);
}

/** A port as a probe, Service or NetworkPolicy names it (by number, or by the container port's name). */
function containerPort(ref: number | string): number {
  if (typeof ref === 'number') return ref;
  const named = (container.ports ?? []).find((p: Json) => p.name === ref);
  if (named === undefined) throw new Error(`no container port is named ${ref}`);
  return named.containerPort;
}

const publicPort = () => Number(setting('PORT'));
const adminPort = () => Number(setting('ADMIN_PORT'));

function selects(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  return selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** Runs an exec probe's `node -e` command as kubelet would in the container, with this environment. */
function runProbe(command: string[], env: Record<string, string>): Promise<number> {
  expect(command[0]).toBe('node');
  return new Promise((resolve) =>
    execFile(process.execPath, command.slice(1), { env: { PATH: process.env.PATH, ...env }, timeout: 10_000 }, (err) => resolve(err === null ? 0 : typeof err.code === 'number' ? err.code : 1)),
  );
}

describe('deploy/kubernetes/', () => {
  it('holds one each of Deployment, Service, ConfigMap, PodDisruptionBudget, HorizontalPodAutoscaler and NetworkPolicy, and no Secret', () => {
    const kinds = all.map((m) => m.object.kind).sort();
    expect(kinds).toEqual(['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'PodDisruptionBudget', 'Service']);
    // Secrets are created with kubectl (deployment.yaml says how): no secret value, real or placeholder, in git.
    for (const { file, object } of all) expect([file, object.kind]).not.toEqual([file, 'Secret']);
  });

  it('runs this version of the image, with its entrypoint and `serve`', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
    expect(deployment.spec.replicas).toBe(3);
    expect(pod.spec.containers).toHaveLength(1);
    expect(container.image).toBe(`${pkg.name}:${pkg.version}`);
    expect(container.command).toBeUndefined(); // the entrypoint's shebang carries the node flags
    expect(container.args ?? ['serve']).toEqual(['serve']);
    expect(selects(deployment.spec.selector.matchLabels, pod.metadata.labels)).toBe(true);
  });

  it('names as container ports the ports the gateway listens on, the admin listener on every address', () => {
    expect(containerPort('http')).toBe(publicPort());
    expect(containerPort('admin')).toBe(adminPort());
    expect(publicPort()).not.toBe(adminPort());
    expect(container.ports).toHaveLength(2);
    // Kubelet's probes and Prometheus come to the pod's address: an admin listener on loopback answers neither.
    expect(['0.0.0.0', '::']).toContain(setting('ADMIN_HOST'));
    const annotations = pod.metadata.annotations ?? {};
    if (annotations['prometheus.io/port'] !== undefined) expect(Number(annotations['prometheus.io/port'])).toBe(adminPort());
  });

  it('sets only settings the gateway knows', () => {
    const names: string[] = (container.env ?? []).map((e: Json) => e.name);
    expect(names.length).toBeGreaterThan(5);
    expect(new Set(names).size).toBe(names.length);
    // A misspelt or removed name would be ignored without a word, and its default used.
    expect(names.filter((name) => !knownSettings.has(name))).toEqual([]);
  });

  it('takes the admin token and the Redis passwords from a Secret, never as text', () => {
    const env: Json[] = container.env ?? [];
    for (const name of ['ADMIN_TOKEN', 'REDIS_PASSWORD']) {
      const entry = env.find((e) => e.name === name);
      expect(entry?.valueFrom?.secretKeyRef).toMatchObject({ name: expect.any(String), key: expect.any(String) });
    }
    for (const entry of env.filter((e) => /(PASSWORD|TOKEN)$/.test(e.name))) {
      expect([entry.name, entry.value]).toEqual([entry.name, undefined]);
      expect([entry.name, typeof entry.valueFrom?.secretKeyRef?.key]).toEqual([entry.name, 'string']);
    }
  });

  it('checks liveness (and start-up) with GET /healthz on the admin port', () => {
    for (const probe of [container.livenessProbe, container.startupProbe].filter((p) => p !== undefined)) {
      expect(probe.httpGet.path).toBe('/healthz');
      expect(containerPort(probe.httpGet.port)).toBe(adminPort());
      expect(probe.httpGet.httpHeaders).toBeUndefined(); // /healthz needs no token
    }
    expect(container.livenessProbe).toBeDefined();
  });

  describe('the readiness probe', () => {
    const probe = container.readinessProbe;
    const tokenInSecret = (container.env ?? []).some((e: Json) => e.name === 'ADMIN_TOKEN' && e.valueFrom !== undefined);
    let state: ReadinessCheck;
    let admin: ReturnType<typeof createAdminServer>;
    let port: number;
    const token = 'readiness-probe-token-0123456789';
    beforeAll(async () => {
      admin = createAdminServer({ metrics: { contentType: 'text/plain', text: async () => '' }, readiness: () => state, token });
      await new Promise<void>((resolve) => admin.listen(0, '127.0.0.1', () => resolve()));
      port = (admin.address() as AddressInfo).port;
    });
    afterAll(() => new Promise<void>((resolve) => admin.close(() => resolve())));
    beforeEach(() => {
      state = { policy: 'ok', key_store: 'ok', shutdown: 'no' };
    });

    it('is not an httpGet: its headers would have to hold the token as text', () => {
      expect(tokenInSecret).toBe(true);
      expect(probe.httpGet).toBeUndefined();
      expect(probe.exec.command).toEqual(['node', '-e', expect.any(String)]);
    });

    it('passes when /readyz on ADMIN_PORT answers 200 to the token from the environment', async () => {
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(port), ADMIN_TOKEN: token })).toBe(0);
    });

    it('fails when /readyz answers 503 (it asks /readyz, not /healthz), and without the right token', async () => {
      state = { policy: 'ok', key_store: 'unavailable', shutdown: 'no' };
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(port), ADMIN_TOKEN: token })).not.toBe(0);
      state = { policy: 'ok', key_store: 'ok', shutdown: 'in_progress' };
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(port), ADMIN_TOKEN: token })).not.toBe(0);
      state = { policy: 'ok', key_store: 'ok', shutdown: 'no' };
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(port), ADMIN_TOKEN: `${token}x` })).not.toBe(0);
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(port) })).not.toBe(0);
    });

    it('fails when nothing answers, within its timeout', async () => {
      const closed = createAdminServer({ metrics: { contentType: 'text/plain', text: async () => '' }, readiness: () => state });
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
      const gone = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      expect(await runProbe(probe.exec.command, { ADMIN_PORT: String(gone), ADMIN_TOKEN: token })).not.toBe(0);
      expect(probe.timeoutSeconds).toBeGreaterThanOrEqual(2); // a node process starts in well under a second
    });
  });

  it('mounts the policy ConfigMap as a directory and points POLICY_FILE at one of its keys', () => {
    const configMap = one('ConfigMap');
    const volume = pod.spec.volumes.find((v: Json) => v.configMap?.name === configMap.metadata.name);
    expect(volume).toBeDefined();
    expect(volume.configMap.items).toBeUndefined(); // every key, under its own name
    const mounts = container.volumeMounts.filter((m: Json) => m.name === volume.name);
    expect(mounts).toHaveLength(1);
    // kubelet never updates a subPath mount: the gateway would never see a new policy.
    expect(mounts[0].subPath).toBeUndefined();
    const policyFile = setting('POLICY_FILE')!;
    expect(path.posix.dirname(policyFile)).toBe(path.posix.normalize(mounts[0].mountPath));
    expect(Object.keys(configMap.data)).toContain(path.posix.basename(policyFile));
  });

  it('the ConfigMap holds the shipped policy, byte for byte', () => {
    const configMap = one('ConfigMap');
    const policy = configMap.data[path.posix.basename(setting('POLICY_FILE')!)];
    expect(policy).toBe(readFileSync(DEFAULT_POLICY_FILE, 'utf8'));
  });

  it('the Service sends port 80 to the public port by name, and nothing to the admin port', () => {
    const service = one('Service');
    expect(selects(service.spec.selector, pod.metadata.labels)).toBe(true);
    expect(service.spec.ports).toHaveLength(1);
    const [port] = service.spec.ports;
    expect(port.port).toBe(80);
    expect(typeof port.targetPort).toBe('string');
    expect(containerPort(port.targetPort)).toBe(publicPort());
    for (const p of service.spec.ports) expect(containerPort(p.targetPort ?? p.port)).not.toBe(adminPort());
  });

  it('the NetworkPolicy opens the public port to all, and the admin port to the monitoring namespace only', () => {
    const policy = one('NetworkPolicy');
    expect(selects(policy.spec.podSelector.matchLabels, pod.metadata.labels)).toBe(true);
    expect(policy.spec.policyTypes).toContain('Ingress');
    const rules: Json[] = policy.spec.ingress;
    // A rule without ports opens every port; a rule without peers admits every source.
    const opens = (rule: Json, port: number) => rule.ports === undefined || rule.ports.some((p: Json) => p.port === undefined || containerPort(p.port) === port);
    const monitoringOnly = (rule: Json) =>
      Array.isArray(rule.from) &&
      rule.from.length > 0 &&
      rule.from.every(
        (peer: Json) =>
          peer.ipBlock === undefined &&
          peer.namespaceSelector?.matchExpressions === undefined &&
          JSON.stringify(peer.namespaceSelector?.matchLabels) === JSON.stringify({ 'kubernetes.io/metadata.name': 'monitoring' }),
      );
    const adminRules = rules.filter((r) => opens(r, adminPort()));
    expect(adminRules.length).toBeGreaterThan(0);
    for (const rule of adminRules) expect(monitoringOnly(rule)).toBe(true);
    expect(rules.some((r) => opens(r, publicPort()) && (r.from === undefined || r.from.length === 0))).toBe(true);
  });

  it('gives a drain its whole time: the grace period is longer than the preStop sleep and SHUTDOWN_TIMEOUT_MS', () => {
    const preStop = container.lifecycle?.preStop;
    const sleep = preStop?.sleep?.seconds ?? (preStop?.exec?.command?.[0] === 'sleep' ? Number(preStop.exec.command[1]) : undefined);
    // Endpoints are removed as the pod stops; the gateway closes its listener at SIGTERM, so it must wait first.
    expect(sleep).toBeGreaterThanOrEqual(1);
    const shutdownSeconds = Number(setting('SHUTDOWN_TIMEOUT_MS')) / 1000;
    expect(pod.spec.terminationGracePeriodSeconds).toBeGreaterThan(shutdownSeconds + sleep!);
  });

  it('runs unprivileged: non-root by number, read-only root, no privilege escalation, no capabilities, RuntimeDefault seccomp', () => {
    const effective = { ...pod.spec.securityContext, ...container.securityContext };
    expect(effective.runAsNonRoot).toBe(true);
    // The image's USER is a name, which kubelet cannot check against runAsNonRoot: the pod must give a number.
    expect(readFileSync('Dockerfile', 'utf8')).toMatch(/^USER node$/m);
    expect(Number.isInteger(effective.runAsUser) && effective.runAsUser > 0).toBe(true);
    expect(effective.seccompProfile).toEqual({ type: 'RuntimeDefault' });
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
    expect(container.securityContext.capabilities.drop).toEqual(['ALL']);
    expect(container.securityContext.capabilities.add).toBeUndefined();
    expect(container.securityContext.privileged).not.toBe(true);
  });

  it('has resource requests and limits, which the autoscaler scales against', () => {
    for (const kind of ['requests', 'limits']) for (const resource of ['cpu', 'memory']) expect([kind, resource, container.resources?.[kind]?.[resource]]).toEqual([kind, resource, expect.anything()]);
    const hpa = one('HorizontalPodAutoscaler');
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBe(deployment.spec.replicas);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    expect(hpa.spec.metrics).toEqual([expect.objectContaining({ type: 'Resource', resource: expect.objectContaining({ name: 'cpu' }) })]);
  });

  it('the PodDisruptionBudget lets one pod of these go at a time', () => {
    const pdb = one('PodDisruptionBudget');
    expect(selects(pdb.spec.selector.matchLabels, pod.metadata.labels)).toBe(true);
    const unavailable = pdb.spec.maxUnavailable ?? deployment.spec.replicas - pdb.spec.minAvailable;
    expect(unavailable).toBe(1);
  });
});
