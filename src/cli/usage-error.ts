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

/** `--help` or `-h` anywhere among a command's arguments, or `help` as its first: its usage, exit 0. */
export function wantsHelp(args: readonly string[]): boolean {
  return args[0] === 'help' || args.includes('--help') || args.includes('-h');
}
