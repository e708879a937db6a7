// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function, and total (inclusive) time
// of the functions whose names or files match an optional filter. Usage:
//   node bench/profile-summary.mjs FILE.cpuprofile [top=25] [filter-regex]
import { readFileSync } from 'node:fs';

const [file, topArg = '25', filter] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/profile-summary.mjs FILE.cpuprofile [top] [filter-regex]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const selfUs = new Map();
for (let i = 0; i < profile.samples.length; i++) selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
const total = [...selfUs.values()].reduce((a, b) => a + b, 0);
const label = (n) => {
  const f = n.callFrame;
  const where = f.url ? `${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(dist|src)\//, '$1/')}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};
const self = new Map();
for (const [id, us] of selfUs) self.set(label(byId.get(id)), (self.get(label(byId.get(id))) ?? 0) + us);
const pct = (us) => `${((us / total) * 100).toFixed(1).padStart(5)}%`;
console.log(`total ${(total / 1e6).toFixed(2)} s sampled\n\nself time:`);
for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg))) console.log(`${pct(us)}  ${name}`);
// By module: each sample goes to the innermost frame that is in the gateway's code or a package
// (with the Node internals it called), so the gateway's own steps and its libraries show their cost.
const moduleOf = (n) => {
  const url = n.callFrame.url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const own = /\/(dist|src)\/(.+)$/.exec(url);
  return own ? own[2] : null;
};
const byModule = new Map();
const byOwnFunction = new Map();
for (const [id, us] of selfUs) {
  let name = null;
  for (let cur = id; cur !== undefined && name === null; cur = parent.get(cur)) {
    name = moduleOf(byId.get(cur));
    if (name !== null && !/node_modules/.test(byId.get(cur).callFrame.url)) byOwnFunction.set(label(byId.get(cur)), (byOwnFunction.get(label(byId.get(cur))) ?? 0) + us);
  }
  const key = name ?? (label(byId.get(id)).startsWith('(') ? label(byId.get(id)) : 'node internals, no package on the stack');
  byModule.set(key, (byModule.get(key) ?? 0) + us);
}
console.log('\nby module (innermost package or gateway file on the stack):');
for (const [name, us] of [...byModule].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg))) console.log(`${pct(us)}  ${name}`);
console.log('\nthe gateway\'s own functions (innermost on the stack, with what they called):');
for (const [name, us] of [...byOwnFunction].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg))) console.log(`${pct(us)}  ${name}`);
if (filter) {
  // Inclusive time: each sample counts once for every distinct matching frame on its stack.
  const re = new RegExp(filter);
  const inclusive = new Map();
  for (const [id, us] of selfUs) {
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const name = label(byId.get(cur));
      if (re.test(name) && !seen.has(name)) {
        seen.add(name);
        inclusive.set(name, (inclusive.get(name) ?? 0) + us);
      }
    }
  }
  console.log(`\ninclusive time of frames matching /${filter}/:`);
  for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, Number(topArg))) console.log(`${pct(us)}  ${name}`);
}
