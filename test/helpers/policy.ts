import { loadPolicyOrThrow } from '../../src/config/load-policy.js';
import type { CompiledPolicy } from '../../src/policy/compile.js';

export const SHIPPED_POLICY_FILE = 'policies/acquirer-api.yaml';

export function shippedPolicy(): Promise<CompiledPolicy> {
  return loadPolicyOrThrow(SHIPPED_POLICY_FILE);
}

export const STATEMENT_ID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
