import { listen } from '../http/listen.js';
import { createSampleUpstream, sampleMerchants, sampleStatements } from './sample-upstream.js';

/**
 * The sample statements service on its own (examples/docker-compose.yml): PORT (default 8081),
 * HOST (default 0.0.0.0), ACQUIRERS (comma-separated, default acq_alpha,acq_beta). Each acquirer has
 * the merchants `<acquirer>_m1` and `<acquirer>_m2`, which the startup line lists. With
 * ACQUIRER_SIGNING_SECRET, the gateway's, it checks the gateway's signature on every request.
 */
const acquirers = (process.env.ACQUIRERS ?? 'acq_alpha,acq_beta').split(',').map((s) => s.trim()).filter(Boolean);
const server = createSampleUpstream(sampleStatements(acquirers), { signingSecret: process.env.ACQUIRER_SIGNING_SECRET });
const port = await listen(server, Number(process.env.PORT ?? 8081), process.env.HOST ?? '0.0.0.0');
process.stdout.write(`${JSON.stringify({ msg: 'sample statements service listening', port, acquirers, merchants: sampleMerchants(acquirers), checks_signature: Boolean(process.env.ACQUIRER_SIGNING_SECRET) })}\n`);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
