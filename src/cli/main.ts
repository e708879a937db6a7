/**
 * @module
 * The command line: reads the command and runs it. Only light modules are loaded before the command
 * is known: each command's own are imported when it runs, and serve's signal handling begins before
 * them (lifecycle/signals.ts).
 */
import { readFileSync } from 'node:fs';
import { holdSignalsDuringStartUp } from '../lifecycle/signals.js';
import { redactKeysAndBodies } from '../secrets/redact.js';
import { AnsweredNo, CommandError, PolicyInvalid, UsageError, wantsHelp } from './command-line.js';

const USAGE = `usage: acquirer-gateway <command> [options]
  serve                run the gateway (settings from the environment, or flags)
  keys <subcommand>    create, update, disable, show and list API keys in Redis
  policy <subcommand>  check a route policy, review a change and its impact, explain a request
  --version            print the version
\`acquirer-gateway <command> --help\` describes each.`;

/** The package's version, as npm and the image know it. */
function version(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  switch (command) {
    case 'serve': {
      if (wantsHelp(args)) {
        const { serveUsage } = await import('./serve-command.js');
        process.stdout.write(serveUsage() + '\n');
        return;
      }
      const startUp = holdSignalsDuringStartUp();
      const { serveCommand } = await import('./serve-command.js');
      return serveCommand(args, startUp);
    }
    case 'keys': {
      const { keysCommand } = await import('./keys-command.js');
      return keysCommand(args, { env: process.env, out: (line) => process.stdout.write(line + '\n'), warn: (line) => process.stderr.write(line + '\n') });
    }
    case 'policy': {
      const { policyCommand } = await import('./policy-command.js');
      return policyCommand(args, {
        env: process.env,
        // A policy holds no key (the loader refuses one), but a file's name could: redacted like stderr.
        out: (text) => process.stdout.write(redactKeysAndBodies(text)),
        err: (line) => process.stderr.write(redactKeysAndBodies(line) + '\n'),
      });
    }
    case '--help':
    case '-h':
    case 'help':
      process.stdout.write(USAGE + '\n');
      return;
    case '--version':
    case '-v':
      process.stdout.write(version() + '\n');
      return;
    case undefined:
      throw new UsageError(`a command is needed\n${USAGE}`);
    default:
      throw new UsageError(`unknown command "${command}"\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // A message may quote what an operator typed where it did not belong (a key as a command, an
  // option, a list entry, a file name): never the key, nor its random part pasted alone.
  const say = (text: string) => process.stderr.write(`acquirer-gateway: ${redactKeysAndBodies(text)}\n`);
  if (err instanceof UsageError) {
    say(err.message);
    process.exit(2);
  }
  if (err instanceof PolicyInvalid) process.exit(1); // its problems are printed already
  if (err instanceof AnsweredNo) {
    process.exitCode = 3; // its report is printed already, and may still be on its way to a pipe
    return;
  }
  if (err instanceof CommandError) {
    say(err.message);
    process.exit(1);
  }
  say(`unexpected error: ${(err as Error)?.stack ?? String(err)}`);
  process.exit(1);
});
