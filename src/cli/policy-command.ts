/**
 * @module
 * `acquirer-gateway policy …`: tools for the repository that holds the policy, and its CI.
 */
import { DEFAULT_POLICY_FILE } from '../config/defaults.js';
import { CONFIG_FIELDS } from '../config/env.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { diffPolicies, routeTable } from '../policy/diff.js';
import { formatPolicyError, loadPolicy } from '../policy/load.js';
import { parseCommandLine, PolicyInvalid, UsageError, wantsHelp } from './command-line.js';
import { setting } from './settings.js';

const FILE_DEFAULT = `FILE: POLICY_FILE, else ${DEFAULT_POLICY_FILE}.`;

export const POLICY_USAGE = `usage: acquirer-gateway policy <subcommand> [FILE …]
  check [FILE]     validate a policy as serve would
  diff OLD NEW     what a change does, as Markdown for its pull request
  routes [FILE]    the effective route table
\`acquirer-gateway policy <subcommand> --help\` describes each.
${FILE_DEFAULT}`;

const SUBCOMMAND_USAGE: Readonly<Record<string, string>> = {
  check: `usage: acquirer-gateway policy check [FILE]
Validates a policy exactly as serve does: exit 0 with a one-line summary, or exit 1 with one
\`file:line:column: path: reason\` line per problem on stderr.
${FILE_DEFAULT}`,
  diff: `usage: acquirer-gateway policy diff OLD NEW
Prints what changes from OLD to NEW as Markdown for the pull request, each loosening of access
flagged. Both must be valid policies (exit 1 otherwise).`,
  routes: `usage: acquirer-gateway policy routes [FILE]
Prints the route table a gateway running FILE would enforce.
${FILE_DEFAULT}`,
};

async function load(file: string, err: (line: string) => void): Promise<CompiledPolicy> {
  const result = await loadPolicy(file);
  if (result.ok) return result.policy;
  for (const error of result.errors) err(formatPolicyError(error));
  throw new PolicyInvalid(`${file}: policy refused`);
}

export interface PolicyContext {
  readonly env: NodeJS.ProcessEnv;
  readonly out: (text: string) => void;
  readonly err: (line: string) => void;
}

export async function policyCommand(args: string[], ctx: PolicyContext): Promise<void> {
  const [sub, ...given] = args;
  const usage = sub !== undefined && Object.hasOwn(SUBCOMMAND_USAGE, sub) ? SUBCOMMAND_USAGE[sub] : undefined;
  if (usage !== undefined && wantsHelp(given)) return ctx.out(usage + '\n');
  if (wantsHelp(args)) return ctx.out(POLICY_USAGE + '\n');
  // No options: anything that looks like one is refused (a file named so follows `--`).
  const rest = sub === undefined ? [] : parseCommandLine(given, {}, true).positionals;
  // As serve reads it: an empty POLICY_FILE is refused with the variable named, not read as no file.
  const defaultFile = () => setting(ctx.env, CONFIG_FIELDS.policyFile);
  switch (sub) {
    case 'check': {
      if (rest.length > 1) throw new UsageError(`check takes at most one file\n${SUBCOMMAND_USAGE.check}`);
      const file = rest[0] ?? defaultFile();
      const policy = await load(file, ctx.err);
      ctx.out(`${file}: ok (${policy.routes.length} routes, ${policy.permissions.length} permissions, sha256 ${policy.contentHash})\n`);
      return;
    }
    case 'diff': {
      if (rest.length !== 2) throw new UsageError(`diff takes two files\n${SUBCOMMAND_USAGE.diff}`);
      const [oldFile, newFile] = rest as [string, string];
      const [oldPolicy, newPolicy] = [await load(oldFile, ctx.err), await load(newFile, ctx.err)];
      ctx.out(diffPolicies(oldPolicy, newPolicy, oldFile, newFile));
      return;
    }
    case 'routes': {
      if (rest.length > 1) throw new UsageError(`routes takes at most one file\n${SUBCOMMAND_USAGE.routes}`);
      ctx.out(routeTable(await load(rest[0] ?? defaultFile(), ctx.err)));
      return;
    }
    default:
      throw new UsageError(sub === undefined ? POLICY_USAGE : `unknown policy command "${sub}"\n${POLICY_USAGE}`);
  }
}
