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
const REDIS = 'Redis: REDIS_URL (or REDIS_SENTINELS or REDIS_CLUSTER_NODES), REDIS_KEY_PREFIX.';

export const POLICY_USAGE = `usage: acquirer-gateway policy <subcommand> [FILE …]
  check [FILE]     validate a policy as serve would
  diff OLD NEW     what a change does, as Markdown for its pull request
  impact OLD NEW   which keys in Redis gain and lose access with a change, as Markdown
  routes [FILE]    the effective route table
  explain METHOD TARGET --key-id ID   how the gateway would judge a request; sends nothing
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
  impact: `usage: acquirer-gateway policy impact OLD NEW
Prints, as Markdown for the pull request, which keys in Redis gain and which lose access to each
route when NEW replaces OLD, with counts per acquirer; Redis is only read. Exit 0: no key loses
access; 3: one does; 1: an invalid policy, Redis unreachable, or a key record it cannot read.
${REDIS}`,
  routes: `usage: acquirer-gateway policy routes [FILE]
Prints the route table a gateway running FILE would enforce.
${FILE_DEFAULT}`,
  explain: `usage: acquirer-gateway policy explain METHOD TARGET --key-id ID
                                      [--from ADDRESS] [--policy FILE]
Says which step of the gateway decides the request and why, and what it would answer or send
upstream; sends nothing. Exit 0: allowed; 3: refused; 1: no such key, or Redis unreachable.
  TARGET            the request-target as a client sends it: /v1/…?page=2
  --key-id ID       the key's id (key_…, as keys list prints it), read from Redis
  --from ADDRESS    the client's address as the gateway judges it (after TRUSTED_PROXIES)
  --policy FILE     the policy to judge by (POLICY_FILE, else ${DEFAULT_POLICY_FILE})
With ACQUIRER_SIGNING_SECRET set, the signature headers are listed as signed this second.
${REDIS}`,
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
  // As serve reads it: an empty POLICY_FILE is refused with the variable named, not read as no file.
  const defaultFile = () => setting(ctx.env, CONFIG_FIELDS.policyFile);
  const loadFile = (file: string) => load(file, ctx.err);
  // The commands that read Redis are loaded only when run: the others need no Redis client.
  if (sub === 'explain') {
    const { explainCommand } = await import('./policy-explain.js');
    return explainCommand(given, { env: ctx.env, out: ctx.out, load: loadFile, defaultFile, usage: SUBCOMMAND_USAGE.explain! });
  }
  // No options: anything that looks like one is refused (a file named so follows `--`).
  const rest = sub === undefined ? [] : parseCommandLine(given, {}, true).positionals;
  switch (sub) {
    case 'check': {
      if (rest.length > 1) throw new UsageError(`check takes at most one file\n${SUBCOMMAND_USAGE.check}`);
      const file = rest[0] ?? defaultFile();
      const policy = await loadFile(file);
      ctx.out(`${file}: ok (${policy.routes.length} routes, ${policy.permissions.length} permissions, sha256 ${policy.contentHash})\n`);
      return;
    }
    case 'diff': {
      if (rest.length !== 2) throw new UsageError(`diff takes two files\n${SUBCOMMAND_USAGE.diff}`);
      const [oldFile, newFile] = rest as [string, string];
      const [oldPolicy, newPolicy] = [await loadFile(oldFile), await loadFile(newFile)];
      ctx.out(diffPolicies(oldPolicy, newPolicy, oldFile, newFile));
      return;
    }
    case 'impact': {
      if (rest.length !== 2) throw new UsageError(`impact takes two files\n${SUBCOMMAND_USAGE.impact}`);
      const { impactCommand } = await import('./policy-impact.js');
      return impactCommand(rest[0]!, rest[1]!, { env: ctx.env, out: ctx.out, load: loadFile });
    }
    case 'routes': {
      if (rest.length > 1) throw new UsageError(`routes takes at most one file\n${SUBCOMMAND_USAGE.routes}`);
      ctx.out(routeTable(await loadFile(rest[0] ?? defaultFile())));
      return;
    }
    default:
      throw new UsageError(sub === undefined ? POLICY_USAGE : `unknown policy command "${sub}"\n${POLICY_USAGE}`);
  }
}
