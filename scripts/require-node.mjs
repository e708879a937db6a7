// Stops with one line when this Node.js is older than package.json's `engines.node` needs. Plain
// JavaScript of the oldest syntax, so that it runs on the Node it refuses: imported first by the
// command (dist/cli.js), and run first by `npm start` and `npm test`.
import { readFileSync } from 'node:fs';

var engines = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).engines.node;
var needed = Number(/(\d+)/.exec(engines)[1]);
var found = process.versions.node;
if (Number(found.split('.')[0]) < needed) {
  process.stderr.write(
    'acquirer-gateway: Node.js ' + needed + ' or later is needed, and this is ' + found +
      ': install it with `npm install -g node@' + needed + '` (or `nvm install ' + needed + '`), then run this again\n',
  );
  process.exit(1);
}
