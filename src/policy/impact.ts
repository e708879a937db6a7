/**
 * @module
 * `policy impact`: which keys gain and which lose access to each route when one policy replaces
 * another, judged with the permissions step's own decision (route-access.ts), as Markdown for the
 * pull request in the manner of `policy diff`.
 */
import type { CompiledPolicy, CompiledRoute } from './compile.js';
import { code, list as permissionList, routeKey } from './diff.js';
import { missingPermissions } from './route-access.js';

/** What access depends on in a key record (keys/api-key.ts, ApiKeyRecord): never its hash. */
export interface KeyHolding {
  readonly id: string;
  readonly acquirer_id: string;
  readonly permissions: readonly string[];
  readonly disabled_at: string | null;
}

/** A route, by method and path template, in either policy, and the keys whose access to it changes. */
export interface RouteImpact {
  readonly route: string;
  readonly before: CompiledRoute | undefined;
  readonly after: CompiledRoute | undefined;
  readonly gained: readonly KeyHolding[];
  readonly lost: readonly KeyHolding[];
}

/** A permission keys carry that the new catalogue lacks: it grants nothing there. */
export interface StalePermission {
  readonly name: string;
  /** In the old catalogue: this change removes it. */
  readonly removed: boolean;
  readonly keys: readonly KeyHolding[];
}

export interface KeyImpact {
  /** Routes where some key gains or loses access, the old policy's order first. */
  readonly routes: readonly RouteImpact[];
  /** Keys judged: those not disabled. */
  readonly judged: number;
  /** Disabled keys, left out: they have access to nothing under either policy. */
  readonly disabled: number;
  readonly stale: readonly StalePermission[];
}

/** Whether a key that is not disabled may call the route: it carries every permission it requires. */
function mayCall(route: CompiledRoute | undefined, granted: ReadonlySet<string>): boolean {
  return route !== undefined && missingPermissions(granted, route.permissions).length === 0;
}

/**
 * Which keys gain and lose access to each route of either policy. A key has access to a route when
 * it is not disabled and carries the route's permissions; its whitelist does not depend on the policy.
 * @example keyImpact(oldPolicy, newPolicy, await store.list()).routes.filter((r) => r.lost.length > 0)
 */
export function keyImpact(oldPolicy: CompiledPolicy, newPolicy: CompiledPolicy, keys: readonly KeyHolding[]): KeyImpact {
  const live = keys.filter((key) => key.disabled_at === null);
  const granted = new Map(live.map((key) => [key, new Set(key.permissions)]));
  const before = new Map(oldPolicy.routes.map((r) => [routeKey(r), r]));
  const after = new Map(newPolicy.routes.map((r) => [routeKey(r), r]));
  const routes: RouteImpact[] = [];
  for (const route of new Set([...before.keys(), ...after.keys()])) {
    const [was, is] = [before.get(route), after.get(route)];
    const gained = live.filter((key) => !mayCall(was, granted.get(key)!) && mayCall(is, granted.get(key)!));
    const lost = live.filter((key) => mayCall(was, granted.get(key)!) && !mayCall(is, granted.get(key)!));
    if (gained.length > 0 || lost.length > 0) routes.push({ route, before: was, after: is, gained, lost });
  }
  const stale = new Map<string, KeyHolding[]>();
  for (const key of live) {
    for (const name of key.permissions) if (!newPolicy.permissionNames.has(name)) stale.set(name, [...(stale.get(name) ?? []), key]);
  }
  return {
    routes,
    judged: live.length,
    disabled: keys.length - live.length,
    stale: [...stale].sort(([a], [b]) => a.localeCompare(b)).map(([name, holders]) => ({ name, removed: oldPolicy.permissionNames.has(name), keys: holders })),
  };
}

/** Whether some key loses access to some route (`policy impact` then exits 3). */
export function losesAccess(impact: KeyImpact): boolean {
  return impact.routes.some((route) => route.lost.length > 0);
}

const keyCount = (n: number) => `${n} ${n === 1 ? 'key' : 'keys'}`;
const routeCount = (n: number) => `${n} ${n === 1 ? 'route' : 'routes'}`;

/** Keys grouped by acquirer, with a count each: `acq_1` (2): `key_a`, `key_b`; `acq_2` (1): `key_c`. */
function byAcquirer(holders: readonly KeyHolding[]): string {
  const groups = new Map<string, string[]>();
  for (const key of holders) groups.set(key.acquirer_id, [...(groups.get(key.acquirer_id) ?? []), key.id]);
  return [...groups]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([acquirer, ids]) => `${code(acquirer)} (${ids.length}): ${ids.map(code).join(', ')}`)
    .join('; ');
}

/** Distinct keys per acquirer that lose and that gain access to some route. */
function acquirerTable(impact: KeyImpact): string[] {
  const counts = new Map<string, { lose: Set<string>; gain: Set<string> }>();
  const count = (key: KeyHolding, which: 'lose' | 'gain') => {
    const entry = counts.get(key.acquirer_id) ?? { lose: new Set(), gain: new Set() };
    entry[which].add(key.id);
    counts.set(key.acquirer_id, entry);
  };
  for (const route of impact.routes) {
    for (const key of route.lost) count(key, 'lose');
    for (const key of route.gained) count(key, 'gain');
  }
  const rows = [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([acquirer, { lose, gain }]) => `| ${code(acquirer)} | ${lose.size} | ${gain.size} |`);
  return ['| acquirer | keys that lose access | keys that gain access |', '|---|---|---|', ...rows, ''];
}

/** What the route requires now, and before. */
function requirement(route: RouteImpact): string {
  if (route.before === undefined) return `A new route; requires ${permissionList(route.after!.permissions)}.`;
  if (route.after === undefined) return `Removed; it required ${permissionList(route.before.permissions)}.`;
  return `Requires ${permissionList(route.after.permissions)} (was ${permissionList(route.before.permissions)}).`;
}

function routeSection(route: RouteImpact): string[] {
  const ids = [...new Set([route.before?.id, route.after?.id].filter((id): id is string => id !== undefined))].map(code).join(' → ');
  const lines = [`### ${code(route.route)} (route ${ids})`, '', requirement(route), ''];
  if (route.lost.length > 0) lines.push(`- ⚠️ **loses access: ${keyCount(route.lost.length)}**: ${byAcquirer(route.lost)}`);
  if (route.gained.length > 0) lines.push(`- gains access: ${keyCount(route.gained.length)}: ${byAcquirer(route.gained)}`);
  return [...lines, ''];
}

/**
 * The impact as Markdown for a pull request: a summary with counts per acquirer, a section per
 * route whose access changes, the permissions that stop meaning anything, and what was judged.
 */
export function impactMarkdown(impact: KeyImpact, oldName: string, newName: string): string {
  const out = [`## Key access: ${code(oldName)} → ${code(newName)}`, ''];
  const losing = new Set(impact.routes.flatMap((r) => r.lost.map((k) => k.id)));
  const gaining = new Set(impact.routes.flatMap((r) => r.gained.map((k) => k.id)));
  const losingRoutes = impact.routes.filter((r) => r.lost.length > 0).length;
  const gainingRoutes = impact.routes.filter((r) => r.gained.length > 0).length;
  if (impact.routes.length === 0) out.push(`No key gains or loses access to any route (${keyCount(impact.judged)} judged).`, '');
  else {
    const verb = (n: number, one: string, many: string) => `${keyCount(n)} ${n === 1 ? one : many}`;
    const lose = losing.size > 0 ? `⚠️ **${verb(losing.size, 'loses', 'lose')} access** (to ${routeCount(losingRoutes)})` : 'No key loses access';
    const gain = gaining.size > 0 ? `${verb(gaining.size, 'gains', 'gain')} access (to ${routeCount(gainingRoutes)})` : 'none gains any';
    out.push(`${lose}; ${gain}; ${keyCount(impact.judged)} judged.`, '', ...acquirerTable(impact));
    for (const route of impact.routes) out.push(...routeSection(route));
  }
  if (impact.stale.length > 0) {
    out.push('### Permissions keys carry that the new catalogue lacks', '');
    for (const permission of impact.stale) {
      const why = permission.removed ? 'removed from the catalogue by this change' : 'in neither catalogue';
      out.push(`- ${code(permission.name)} (${why}): ${keyCount(permission.keys.length)}: ${byAcquirer(permission.keys)}. It grants nothing under the new policy.`);
    }
    out.push('');
  }
  out.push(
    '---',
    '',
    `${keyCount(impact.judged + impact.disabled)} read from Redis; ${impact.disabled} disabled, left out. A key has access to a route when it is not disabled ` +
      'and carries every permission the route requires. IP whitelists are the keys\' own and do not depend on the policy: ' +
      'a key counted here is still refused outside its whitelist.',
    '',
  );
  return out.join('\n');
}
