/**
 * @module
 * What every command shares: its exit codes (by error class), `--help`, and strict flags. Loaded
 * before the command is known, so it imports nothing heavy.
 */
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';

/** A bad command line or a refused input: the message goes to stderr and the exit code is 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A command that could not do its work (missing key, Redis down): exit code 1. */
export class CommandError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CommandError';
  }
}

/** A refused policy file: its problems are printed already, one `file:line:column: reason` per line; exit code 1. */
export class PolicyInvalid extends CommandError {}

/**
 * The command did its work and its answer is no (a request the gateway would refuse, a change that
 * takes access from a key): its report is printed already; exit code 3, for CI to act on.
 */
export class AnsweredNo extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AnsweredNo';
  }
}

/** `--help` or `-h` anywhere among a command's arguments, or `help` as its first: its usage, exit 0. */
export function wantsHelp(args: readonly string[]): boolean {
  // After `--`, `-h` is a name (a file's), not a request for help.
  const options = args.includes('--') ? args.slice(0, args.indexOf('--')) : args;
  return args[0] === 'help' || options.includes('--help') || options.includes('-h');
}

/**
 * A command's flags and positionals, strictly: an unknown flag, or one given twice, is a usage error.
 * parseArgs keeps the last of a repeated flag, so `--allow-ip A --allow-ip B` would store only B, and
 * `--permissions … --permissions …` only the second list, with nothing said.
 */
export function parseCommandLine(args: string[], options: ParseArgsOptionsConfig, allowPositionals: boolean) {
  let parsed;
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals, tokens: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const seen = new Set<string>();
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name}: given more than once; give it once (a list is comma-separated)`);
    seen.add(token.name);
  }
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}
