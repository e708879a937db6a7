// Stops with one line when this Node.js is older than package.json's `engines.node` needs. Plain
// JavaScript of the oldest syntax, so that it runs on the Node it refuses: imported first by the
// command (dist/cli.js), and run first by `npm start` and `npm test`.
import { readFileSync } from 'node:fs';

var engines = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
// `>=24.12.0`, `>=24.12` or `>=24`: the parts not given are 0.
var needed = (/(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(engines) || []).slice(1, 4).map(function (part) {
  return Number(part || 0);
});
var found = process.versions.node;
var have = found.split('.').map(Number);
var older = false;
for (var i = 0; i < 3; i++) {
  if (have[i] !== needed[i]) {
    older = have[i] < needed[i];
    break;
  }
}
if (older) {
  process.stderr.write(
    'acquirer-gateway: Node.js ' + needed.join('.') + ' or later is needed, and this is ' + found +
      ': install it with `npm install -g node@' + needed[0] + '` (or `nvm install ' + needed[0] + '`), then run this again\n',
  );
  process.exit(1);
}
