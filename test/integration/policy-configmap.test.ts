import { lstatSync, mkdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runCli, startServe, type ServeProcess } from '../helpers/cli.js';
import { request } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { tempDir } from '../helpers/temp-dir.js';
import { stopAll } from '../helpers/stop-all.js';
import { waitFor } from '../helpers/wait.js';
import { metricValue } from '../helpers/metrics.js';

/**
 * The policy as Kubernetes delivers it (deploy/kubernetes/): a ConfigMap mounted as a directory, where
 * kubelet replaces every file at once by swapping the `..data` symlink, never by writing the file.
 */
const KEY = 'acquirer-api.yaml';

let redis: TestRedis;
let g: ServeProcess | undefined;
let mount: string;
let stamp = 0;

/**
 * What kubelet's atomic writer does on each update: the files into a new timestamped directory, a
 * `..data_tmp` symlink to it renamed over `..data`, each key a symlink through `..data` (made once),
 * and the previous timestamped directory removed.
 */
function kubeletWrite(dir: string, files: Record<string, string>): void {
  const previous = (() => {
    try {
      return readlinkSync(path.join(dir, '..data'));
    } catch {
      return undefined;
    }
  })();
  const fresh = `..2026_01_01_00_00_${String(stamp).padStart(2, '0')}.${1_000_000_000 + stamp++}`;
  mkdirSync(path.join(dir, fresh), { mode: 0o755 });
  for (const [name, content] of Object.entries(files)) writeFileSync(path.join(dir, fresh, name), content, { mode: 0o644 });
  symlinkSync(fresh, path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
  for (const name of Object.keys(files)) {
    const visible = path.join(dir, name);
    try {
      lstatSync(visible);
    } catch {
      symlinkSync(path.posix.join('..data', name), visible);
    }
  }
  if (previous !== undefined) rmSync(path.join(dir, previous), { recursive: true, force: true });
}


const metricsText = async (s: ServeProcess) => (await request(s.adminUrl, '/metrics')).body.toString();

/** The hash `policy_info` carries for a policy, as `policy check` reports it. */
async function policyHash(content: string): Promise<string> {
  const file = path.join(tempDir('agw-policy-hash-'), KEY);
  writeFileSync(file, content);
  const checked = await runCli(['policy', 'check', file]);
  expect(checked.code).toBe(0);
  return checked.stdout.match(/sha256 ([0-9a-f]{64})/)![1]!;
}

const shipped = readFileSync('policies/acquirer-api.yaml', 'utf8');
const withoutCatalogueRoute = shipped.replace(/\n  - id: api_keys_permissions[\s\S]*$/, '\n');

beforeAll(async () => {
  redis = await startTestRedis();
  mount = tempDir('agw-configmap-');
});

afterAll(() =>
  stopAll(
    () => g?.stop(),
    () => redis?.stop(),
  ),
);

it('reloads when kubelet swaps the ConfigMap directory, and again on the next swap', async () => {
  const [first, changed] = [await policyHash(shipped), await policyHash(withoutCatalogueRoute)];
  expect(changed).not.toBe(first);
  kubeletWrite(mount, { [KEY]: shipped });
  const file = path.join(mount, KEY);
  expect(readlinkSync(file)).toBe(path.posix.join('..data', KEY)); // the layout kubelet makes

  g = await startServe({ REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, UPSTREAM_URL: 'http://127.0.0.1:9', POLICY_FILE: file });
  await waitFor(async () => (await request(g!.adminUrl, '/readyz')).status === 200, { what: 'readiness' });
  expect(metricValue(await metricsText(g), 'acquirer_gateway_policy_info', { hash: first })).toBe(1);

  // The ConfigMap is edited: kubelet writes the new content and swaps.
  kubeletWrite(mount, { [KEY]: withoutCatalogueRoute });
  await waitFor(async () => metricValue(await metricsText(g!), 'acquirer_gateway_policy_info', { hash: changed }) === 1, { timeoutMs: 10_000, what: 'the new policy after the swap' });
  const text = await metricsText(g);
  expect(metricValue(text, 'acquirer_gateway_policy_info', { hash: first })).toBeUndefined();
  expect(metricValue(text, 'acquirer_gateway_policy_reloads_total', { result: 'success' })).toBe(1);
  expect(metricValue(text, 'acquirer_gateway_policy_reloads_total', { result: 'failure' })).toBe(0);
  const reloaded = await waitFor(() => g!.logLines.map((l) => JSON.parse(l)).find((e) => e.event === 'policy_reloaded'), { what: 'policy_reloaded in the log' });
  expect(reloaded).toMatchObject({ file, trigger: 'file', from: first, to: changed });

  // The old timestamped directory is gone, the watched directory is the same: a second update is seen too.
  kubeletWrite(mount, { [KEY]: shipped });
  await waitFor(async () => metricValue(await metricsText(g!), 'acquirer_gateway_policy_info', { hash: first }) === 1, { timeoutMs: 10_000, what: 'the policy after the second swap' });
  expect(metricValue(await metricsText(g), 'acquirer_gateway_policy_reloads_total', { result: 'success' })).toBe(2);
  expect((await request(g.adminUrl, '/readyz')).status).toBe(200);
}, 30_000);
