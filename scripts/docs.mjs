// `npm run docs`: writes the reference that follows from the code (after `npm run build`):
// docs/configuration.md whole, and the marked sections of docs/policy.md and docs/operations.md.
// test/unit/docs.test.ts fails when a page is not what this writes.
import { readFileSync, writeFileSync } from 'node:fs';

const dist = (path) => import(new URL(`../dist/${path}`, import.meta.url).href);
const { renderPolicyFields, renderShippedRoutes } = await dist('policy/policy-doc.js');
const { loadPolicyOrThrow } = await dist('policy/load.js');
const { renderLogEvents } = await dist('observability/logger/log-events.js');
const { renderConfigurationDoc, replaceGenerated } = await dist('config/configuration-doc.js');

const doc = (name) => new URL(`../docs/${name}`, import.meta.url);
writeFileSync(doc('configuration.md'), renderConfigurationDoc());
const shipped = (await loadPolicyOrThrow(new URL('../policies/acquirer-api.yaml', import.meta.url).pathname)).policy;
const policyPage = replaceGenerated(readFileSync(doc('policy.md'), 'utf8'), 'policy-fields', renderPolicyFields());
writeFileSync(doc('policy.md'), replaceGenerated(policyPage, 'shipped-routes', renderShippedRoutes(shipped)));
writeFileSync(doc('operations.md'), replaceGenerated(readFileSync(doc('operations.md'), 'utf8'), 'log-events', renderLogEvents()));
process.stdout.write('docs: configuration.md, policy.md (policy-fields, shipped-routes), operations.md (log-events)\n');
