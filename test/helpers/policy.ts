import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadPolicyOrThrow } from '../../src/policy/load.js';
import type { CompiledPolicy } from '../../src/policy/compile.js';
import { tempDir } from './temp-dir.js';

export const SHIPPED_POLICY_FILE = 'policies/acquirer-api.yaml';

export function shippedPolicy(): Promise<CompiledPolicy> {
  return loadPolicyOrThrow(SHIPPED_POLICY_FILE).then((loaded) => loaded.policy);
}

export const STATEMENT_ID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';

/**
 * The shipped policy with its routes' `query` declarations made `any`, so that every query is forwarded
 * unchecked: for tests that tell a fake upstream what to do through the query (`?mode=reset`). Written
 * once per test file, to a temporary directory.
 */
let queryUnchecked: string | undefined;
export function queryUncheckedPolicyFile(): string {
  if (queryUnchecked === undefined) {
    const shipped = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
    const text = shipped.replace(/^( +query: ).*\n/gm, '$1any\n');
    if (text === shipped) throw new Error('the shipped policy declares no query: nothing to remove');
    queryUnchecked = path.join(tempDir('gw-policy-'), 'query-unchecked.yaml');
    writeFileSync(queryUnchecked, text);
  }
  return queryUnchecked;
}

/**
 * The shipped policy with rates: `defaultRate` as `rate_limits.default`, and `downloadRate` as the
 * statement download's own `rate_limit` (each a YAML flow mapping, `{ per_second: 1, burst: 2 }`).
 */
export function rateLimitedPolicyText({ defaultRate, downloadRate }: { defaultRate?: string; downloadRate?: string }): string {
  let text = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
  const swap = (from: string, to: string) => {
    if (!text.includes(from)) throw new Error(`the shipped policy changed: no ${JSON.stringify(from)}`);
    text = text.replace(from, to);
  };
  if (defaultRate !== undefined) swap('\nroutes:\n', `\nrate_limits:\n  default: ${defaultRate}\n\nroutes:\n`);
  if (downloadRate !== undefined) swap('    params: { statement_id: uuid }\n', `    params: { statement_id: uuid }\n    rate_limit: ${downloadRate}\n`);
  return text;
}
