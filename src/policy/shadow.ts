/**
 * @module
 * The shadow policy's verdict on a request (POLICY_SHADOW_FILE, docs/policy.md "Trying a policy in
 * the shadow"): the route, permission and query steps judged with the request path's own decisions
 * (matchRoute, missingPermissions, queryRefusal), as `policy explain` judges them. Pure.
 */
import type { ErrorCode } from '../errors/codes.js';
import type { CompiledPolicy, CompiledRoute } from './compile.js';
import { queryRefusal } from './match-query.js';
import { matchRoute } from './match-route.js';
import { missingPermissions } from './route-access.js';

/** What a policy decides of a request, as the metric's `enforced` and `shadow` labels say it: a closed set. */
export const SHADOW_VERDICTS = ['allow', 'not_found', 'forbidden', 'bad_request'] as const;
export type ShadowVerdict = (typeof SHADOW_VERDICTS)[number];

/** The refusals of the steps a shadow judges, from the one error table. */
const VERDICT_OF_CODE: Partial<Record<ErrorCode, ShadowVerdict>> = {
  ROUTE_NOT_FOUND: 'not_found',
  PERMISSION_DENIED: 'forbidden',
  QUERY_NOT_ALLOWED: 'bad_request',
};

export interface PolicyJudgement {
  readonly verdict: ShadowVerdict;
  /** The route the method and target matched; undefined when none did. */
  readonly route: CompiledRoute | undefined;
}

/**
 * How `policy` judges a request of a valid key holding `permissions`: the route, then its
 * permissions, then its query, in the pipeline's order. A target not in canonical form is refused
 * alike by every policy, and is not asked about (enforcedVerdict).
 * @example judgeByPolicy(candidate, 'GET', '/v1/acquirer/eod_statements?page=2', new Set(['eod_list'])) // { verdict: 'forbidden', route }
 */
export function judgeByPolicy(policy: CompiledPolicy, method: string, target: string, permissions: ReadonlySet<string>): PolicyJudgement {
  const match = matchRoute(policy, method, target);
  if (match.kind !== 'matched') return { verdict: 'not_found', route: undefined };
  const route = match.route;
  if (missingPermissions(permissions, route.permissions).length > 0) return { verdict: 'forbidden', route };
  if (queryRefusal(route, target) !== null) return { verdict: 'bad_request', route };
  return { verdict: 'allow', route };
}

/**
 * What the enforced pipeline decided at the steps a shadow judges, from the request's refusal code
 * and whether a route matched. null: decided before them (no valid key, the key's IP whitelist, a
 * target not in canonical form), where both policies answer alike.
 */
export function enforcedVerdict(code: ErrorCode | undefined, routeMatched: boolean): ShadowVerdict | null {
  const refused = code === undefined ? undefined : VERDICT_OF_CODE[code];
  if (refused !== undefined) return refused;
  // Any later refusal (the body, the acquirer's share, the upstream) came after the policy allowed it.
  return routeMatched ? 'allow' : null;
}
