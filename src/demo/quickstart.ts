import { loadConfig } from '../config/env.js';
import { loadPolicyOrThrow } from '../policy/load.js';
import { PolicyFile } from '../policy/watch.js';
import { generateKey, generateKeyId, hashKey } from '../keys/api-key.js';
import { MemoryKeyStore } from '../keys/memory-key-store.js';
import { createLogger } from '../observability/logger/logger.js';
import { startGateway } from '../gateway.js';
import { handleRunningSignals } from '../lifecycle/signals.js';
import { createSampleUpstream, listen, sampleStatements } from './sample-upstream.js';

/**
 * `npm start`: the whole thing on one machine with no outside service. A sample statements service,
 * the gateway in front of it with an in-memory key store, and one key for each of two acquirers.
 */
async function main(): Promise<void> {
  const acquirers = ['acq_alpha', 'acq_beta'];
  const statements = sampleStatements(acquirers);
  const upstream = createSampleUpstream(statements);
  const upstreamPort = await listen(upstream);

  const store = new MemoryKeyStore();
  const keys = new Map<string, string>();
  for (const acquirer of acquirers) {
    const key = generateKey();
    await store.create({
      id: generateKeyId(),
      key_hash: hashKey(key),
      acquirer_id: acquirer,
      permissions: ['eod_list', 'eod_read'],
      allowed_ips: [],
      description: `quickstart key for ${acquirer}`,
      created_at: new Date().toISOString(),
      disabled_at: null,
    });
    keys.set(acquirer, key);
  }

  const config = loadConfig({ LOG_LEVEL: 'warn', ADMIN_PORT: '0', ...process.env, UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}` });
  const logger = createLogger(config.logLevel);
  const loaded = await loadPolicyOrThrow(config.policyFile);
  const gateway = await startGateway(config, { logger, policy: loaded.policy, keyStore: store });
  // Edits to the policy file apply as they do under `serve` (POLICY_WATCH).
  const policyFile = new PolicyFile(config.policyFile, loaded, { logger, reloads: gateway.metrics.policyReloads, onAccepted: (next) => gateway.usePolicy(next.policy) });
  if (config.policyWatch) void policyFile.watch();
  const base = `http://127.0.0.1:${gateway.port}`;
  const alpha = keys.get('acq_alpha')!;
  const beta = keys.get('acq_beta')!;
  const alphaStatement = statements.find((s) => s.acquirerId === 'acq_alpha')!;

  process.stdout.write(`
acquirer-gateway quickstart: gateway on ${base}, sample statements service on 127.0.0.1:${upstreamPort},
metrics on http://127.0.0.1:${gateway.adminPort}/metrics
(in-memory keys, nothing is written anywhere; Ctrl-C stops everything)

# acq_alpha lists its End-of-Day statements
curl -s ${base}/v1/acquirer/eod_statements -H 'Authorization: Bearer ${alpha}'

# acq_alpha downloads one of them (CSV)
curl -s ${base}/v1/acquirer/eod_statements/${alphaStatement.id}.csv -H 'Authorization: Bearer ${alpha}'

# ... or by date
curl -s ${base}/v1/acquirer/eod_statements/by_date/${alphaStatement.date}.csv -H 'Authorization: Bearer ${alpha}'

# the permission catalogue, served by the gateway itself
curl -s ${base}/v1/acquirer/api_keys/permissions -H 'Authorization: Bearer ${beta}'

# acq_beta asks for acq_alpha's statement: 404, exactly as if it did not exist
curl -si ${base}/v1/acquirer/eod_statements/${alphaStatement.id}.csv -H 'Authorization: Bearer ${beta}'

# no key: 401
curl -si ${base}/v1/acquirer/eod_statements
`);

  handleRunningSignals(logger, {
    stop: () => {
      policyFile.close();
      upstream.closeAllConnections();
      Promise.all([gateway.shutdown(), new Promise((resolve) => upstream.close(resolve))]).then(() => process.exit(0));
    },
    reload: () => void policyFile.reload('signal'),
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`quickstart failed: ${(err as Error).message}\n`);
  process.exit(1);
});
