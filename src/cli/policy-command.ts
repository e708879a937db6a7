import { DEFAULT_POLICY_FILE } from '../config/defaults.js';
import { CONFIG_FIELDS, ConfigError, readSetting } from '../config/env.js';
import { formatPolicyError, loadPolicy } from '../policy/load.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { diffPolicies, routeTable } from '../policy/diff.js';
import { parseCommandLine, PolicyInvalid, UsageError, wantsHelp } from './usage-error.js';

export const POLICY_USAGE = `usage:
  acquirer-gateway policy check [FILE]     validate as serve would (exit 0, or 1 with file:line:column: reason)
  acquirer-gateway policy diff OLD NEW     what changed, as Markdown for a pull request
  acquirer-gateway policy routes [FILE]    the effective route table
FILE defaults to POLICY_FILE, else ${DEFAULT_POLICY_FILE}`;

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

/** `acquirer-gateway policy …`: tools for the repository that holds the policy, and its CI. */
export async function policyCommand(args: string[], ctx: PolicyContext): Promise<void> {
  if (wantsHelp(args)) return ctx.out(POLICY_USAGE + '\n');
  const [sub, ...given] = args;
  // No options: anything that looks like one is refused (a file named so follows `--`).
  const rest = sub === undefined ? [] : parseCommandLine(given, {}, true).positionals;
  // As serve reads it: an empty POLICY_FILE is refused with the variable named, not read as no file.
  const defaultFile = () => {
    try {
      return readSetting(ctx.env, CONFIG_FIELDS.policyFile);
    } catch (err) {
      if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
      throw err;
    }
  };
  switch (sub) {
    case 'check': {
      if (rest.length > 1) throw new UsageError(`check takes at most one file\n${POLICY_USAGE}`);
      const file = rest[0] ?? defaultFile();
      const policy = await load(file, ctx.err);
      ctx.out(`${file}: ok (${policy.routes.length} routes, ${policy.permissions.length} permissions, sha256 ${policy.contentHash})\n`);
      return;
    }
    case 'diff': {
      if (rest.length !== 2) throw new UsageError(`diff takes two files\n${POLICY_USAGE}`);
      const [oldFile, newFile] = rest as [string, string];
      const [oldPolicy, newPolicy] = [await load(oldFile, ctx.err), await load(newFile, ctx.err)];
      ctx.out(diffPolicies(oldPolicy, newPolicy, oldFile, newFile));
      return;
    }
    case 'routes': {
      if (rest.length > 1) throw new UsageError(`routes takes at most one file\n${POLICY_USAGE}`);
      ctx.out(routeTable(await load(rest[0] ?? defaultFile(), ctx.err)));
      return;
    }
    default:
      throw new UsageError(sub === undefined ? POLICY_USAGE : `unknown policy command "${sub}"\n${POLICY_USAGE}`);
  }
}
