/**
 * @module
 * `npm start`: the whole thing on one machine with no outside service. A sample acquirer service,
 * the gateway in front of it with an in-memory key store, and one key for each of two acquirers.
 */
import { CONFIG_FIELDS } from '../config/env.js';
import { loadConfig, readSetting } from '../config/load-config.js';
import { followPolicyFile, startGateway, type RunningGateway } from '../gateway.js';
import { listen } from '../http/listen.js';
import { generateKey, generateKeyId, hashKey } from '../keys/api-key.js';
import { MemoryKeyStore } from '../keys/memory-key-store.js';
import { shutdownThenExit } from '../lifecycle/exit.js';
import { handleRunningSignals } from '../lifecycle/signals.js';
import { createLogger } from '../observability/logger/logger.js';
import { loadPolicyOrThrow } from '../policy/load.js';
import { createSampleUpstream, sampleStatements, type SampleStatement } from './sample-upstream.js';

const ACQUIRERS = ['acq_alpha', 'acq_beta'] as const;
/** One of acq_alpha's merchants in the sample service (sample-merchants.ts). */
const ALPHA_MERCHANT = 'acq_alpha_m1';

async function main(): Promise<void> {
  const statements = sampleStatements(ACQUIRERS);
  // With ACQUIRER_SIGNING_SECRET the sample checks what the gateway signs, as a backend would.
  const signingSecrets = readSetting(process.env, CONFIG_FIELDS.acquirerSigningSecret);
  const upstream = createSampleUpstream(statements, { signingSecret: signingSecrets.join(',') });
  const upstreamPort = await listen(upstream, 0, '127.0.0.1');
  // It mints live keys: loopback only unless HOST says otherwise. Quiet but for what goes wrong.
  const config = loadConfig({ LOG_LEVEL: 'warn', ADMIN_PORT: '0', HOST: '127.0.0.1', ...process.env, UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}` });
  // A reload that took is shown at the quickstart's level, as a refused one is.
  const logger = createLogger(config.logLevel, undefined, {}, { eventLevels: { policy_reloaded: 'warn' } });
  const loaded = await loadPolicyOrThrow(config.policyFile);
  const { store, keys } = await quickstartKeys(loaded.policy.permissions.map((p) => p.name));
  const gateway = await startGateway(config, { logger, policy: loaded.policy, keyStore: store });
  // Edits to the policy file apply as they do under `serve` (POLICY_WATCH).
  const policyFile = followPolicyFile(gateway, config, loaded, logger);
  process.stdout.write(banner(gateway, config.host, upstreamPort, keys, statements.find((s) => s.acquirerId === 'acq_alpha')!, signingSecrets.length > 0));
  handleRunningSignals(logger, {
    stop: () => {
      policyFile.close();
      // The gateway drains first: requests in flight still have their upstream.
      const closeUpstream = () =>
        new Promise<void>((resolve) => {
          upstream.closeAllConnections();
          upstream.close(() => resolve());
        });
      shutdownThenExit({ shutdown: () => gateway.shutdown().then(closeUpstream) }, logger);
    },
    reload: () => void policyFile.reload('signal'),
  });
}

/** An in-memory store with one key for each acquirer, carrying every permission of the catalogue. */
async function quickstartKeys(permissions: string[]): Promise<{ store: MemoryKeyStore; keys: Record<(typeof ACQUIRERS)[number], string> }> {
  const store = new MemoryKeyStore();
  const keys = {} as Record<(typeof ACQUIRERS)[number], string>;
  for (const acquirer of ACQUIRERS) {
    const key = generateKey();
    await store.create({
      id: generateKeyId(),
      key_hash: hashKey(key),
      acquirer_id: acquirer,
      permissions,
      allowed_ips: [],
      description: `quickstart key for ${acquirer}`,
      created_at: new Date().toISOString(),
      disabled_at: null,
    });
    keys[acquirer] = key;
  }
  return { store, keys };
}

function banner(gateway: RunningGateway, host: string, upstreamPort: number, keys: Record<(typeof ACQUIRERS)[number], string>, alphaStatement: SampleStatement, signing: boolean): string {
  const shown = host.includes(':') ? (host === '::' ? '[::1]' : `[${host}]`) : host === '0.0.0.0' ? '127.0.0.1' : host;
  const base = `http://${shown}:${gateway.port}`;
  const { acq_alpha: alpha, acq_beta: beta } = keys;
  const users = `${base}/v1/acquirer/merchants/${ALPHA_MERCHANT}/users`;
  return `
acquirer-gateway quickstart: gateway on ${base}, sample acquirer service on 127.0.0.1:${upstreamPort},
metrics on http://127.0.0.1:${gateway.adminPort}/metrics
(in-memory keys, nothing is written anywhere; Ctrl-C stops everything)${signing ? '\n(ACQUIRER_SIGNING_SECRET: the sample service refuses a request the gateway did not sign)' : ''}

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

# acq_alpha creates a user of its merchant ${ALPHA_MERCHANT} (201); the new user's id is kept in USER_ID
NEW_USER=$(curl -s -w '\\nHTTP %{http_code}' -X POST ${users} -H 'Authorization: Bearer ${alpha}' -H 'Content-Type: application/json' -d '{"name":"Ada Lovelace","email":"ada@example.com"}'); echo "$NEW_USER"; USER_ID=$(echo "$NEW_USER" | sed -n 's/.*"id":"\\([0-9a-f-]*\\)".*/\\1/p')

# acq_beta asks for that user: 404, exactly as if it did not exist
curl -si ${users}/$USER_ID -H 'Authorization: Bearer ${beta}'

# a body that names another acquirer: 400, and nothing reaches the service
curl -si -X POST ${users} -H 'Authorization: Bearer ${alpha}' -H 'Content-Type: application/json' -d '{"name":"Eve","email":"eve@example.com","acquirer_id":"acq_beta"}'

# the audit log of acq_alpha's writes, newest first
curl -s '${base}/v1/audit_logs?items=5' -H 'Authorization: Bearer ${alpha}'

# no key: 401
curl -si ${base}/v1/acquirer/eod_statements
`;
}

main().catch((err: unknown) => {
  process.stderr.write(`quickstart failed: ${(err as Error).message}\n`);
  process.exit(1);
});
