// How long a policy takes to load (read, parse, validate, compile: what start-up and every reload
// do, the reload on the running gateway's only JavaScript thread), by number of routes. Each policy
// is the shipped one plus generated resources of four routes each: a list, one by id, its CSV and a
// CSV by date, so routes of one resource share literals and differ in parameters, as an API's do.
// Usage (after `npm run build`): node bench/policy-load.mjs [routes …]   (default 50 200 400 4000)
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = path.resolve(import.meta.dirname, '..');
const { loadPolicy } = await import(pathToFileURL(path.join(root, 'dist/policy/load.js')).href);
const counts = process.argv.slice(2).map(Number);
if (counts.some((n) => !(Number.isInteger(n) && n > 0))) {
  console.error('usage: node bench/policy-load.mjs [routes …]: whole numbers above 0');
  process.exit(2);
}
const shipped = readFileSync(path.join(root, 'policies/acquirer-api.yaml'), 'utf8');
const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-policy-'));
process.once('exit', () => rmSync(dir, { recursive: true, force: true }));

function policyWith(routes) {
  let text = shipped.trimEnd() + '\n';
  for (let r = 0; r * 4 < routes; r++) {
    const base = `/v1/acquirer/resource_${r}`;
    text += `
  - { id: r${r}_list, method: GET, path: ${base}, permissions: [eod_list] }
  - { id: r${r}_get, method: GET, path: "${base}/:id", params: { id: uuid }, permissions: [eod_read] }
  - { id: r${r}_csv, method: GET, path: "${base}/:id.csv", params: { id: uuid }, permissions: [eod_read] }
  - { id: r${r}_by_date, method: GET, path: "${base}/by_date/:date.csv", params: { date: date }, permissions: [eod_read] }
`;
  }
  return text;
}

console.log('| routes | load, ms (median of 3) |\n|---|---|');
for (const routes of counts.length > 0 ? counts : [50, 200, 400, 4000]) {
  const file = path.join(dir, `policy-${routes}.yaml`);
  writeFileSync(file, policyWith(routes));
  const times = [];
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    const result = await loadPolicy(file);
    times.push(performance.now() - started);
    if (!result.ok) throw new Error(`generated policy refused: ${JSON.stringify(result.errors.slice(0, 3))}`);
  }
  times.sort((a, b) => a - b);
  console.log(`| ${routes} | ${times[1].toFixed(0)} |`);
}
