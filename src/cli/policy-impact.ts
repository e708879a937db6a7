/**
 * @module
 * `acquirer-gateway policy impact OLD NEW`: which live keys gain and lose access to each route when
 * NEW replaces OLD (policy/impact.ts), as Markdown for the pull request. Redis is only read.
 */
import type { CompiledPolicy } from '../policy/compile.js';
import { impactMarkdown, keyImpact, losesAccess } from '../policy/impact.js';
import { AnsweredNo, CommandError } from './command-line.js';
import { withKeyStore } from './key-store-access.js';

export interface ImpactContext {
  readonly env: NodeJS.ProcessEnv;
  readonly out: (text: string) => void;
  /** Loads a policy, its problems printed (exit 1). */
  readonly load: (file: string) => Promise<CompiledPolicy>;
}

/** `policy impact`: prints the Markdown; a key that loses access exits 3 (AnsweredNo). */
export async function impactCommand(oldFile: string, newFile: string, ctx: ImpactContext): Promise<void> {
  const [oldPolicy, newPolicy] = [await ctx.load(oldFile), await ctx.load(newFile)];
  const records = await withKeyStore(ctx.env, async (store) => {
    const corrupt: string[] = [];
    const read = await store.list(undefined, (what) => corrupt.push(what));
    // A key left out would be a loss nobody sees.
    if (corrupt.length > 0) throw new CommandError(`${corrupt.length} key record(s) in Redis could not be read (${corrupt.join(', ')}): the impact cannot be judged for every key`);
    return read;
  });
  const impact = keyImpact(oldPolicy, newPolicy, records);
  ctx.out(impactMarkdown(impact, oldFile, newFile));
  if (losesAccess(impact)) throw new AnsweredNo('a key loses access');
}
