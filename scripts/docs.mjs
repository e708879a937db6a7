// `npm run docs`: writes the reference that follows from the code (after `npm run build`):
// docs/configuration.md whole, and the marked sections of docs/policy.md and docs/operations.md.
// test/unit/docs.test.ts fails when a page is not what this writes.
import { readFileSync, writeFileSync } from 'node:fs';

const dist = (path) => import(new URL(`../dist/${path}`, import.meta.url).href);
const { renderPolicyFields } = await dist('policy/policy-doc.js');
const { renderLogEvents } = await dist('observability/logger/log-events.js');
const { renderConfigurationDoc, replaceGenerated } = await dist('config/configuration-doc.js');

const doc = (name) => new URL(`../docs/${name}`, import.meta.url);
writeFileSync(doc('configuration.md'), renderConfigurationDoc());
writeFileSync(doc('policy.md'), replaceGenerated(readFileSync(doc('policy.md'), 'utf8'), 'policy-fields', renderPolicyFields()));
writeFileSync(doc('operations.md'), replaceGenerated(readFileSync(doc('operations.md'), 'utf8'), 'log-events', renderLogEvents()));
process.stdout.write('docs: configuration.md, policy.md (policy-fields), operations.md (log-events)\n');
