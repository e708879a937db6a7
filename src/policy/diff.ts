import { EXPLAINED_STATUSES, mapUpstreamStatus } from '../errors/upstream-status.js';
import type { BodyRule, CompiledPolicy, CompiledRoute } from './compile.js';
import type { RateLimit } from './rate-limit.js';
import { valueTakesAllOf } from './value-types.js';

const EXPLAINED = 'with its own JSON body';

/** What an upstream status is answered with under a policy, as a reviewer reads it. */
function answerTo(status: number, policy: CompiledPolicy): string {
  if (EXPLAINED_STATUSES.has(status) && !policy.upstreamStatusMap.has(status)) return EXPLAINED;
  return String(mapUpstreamStatus(status, policy.upstreamStatusMap));
}

/** One route as a reviewer names it: what a client would call. */
export function routeKey(route: CompiledRoute): string {
  return `${route.method} ${route.path}`;
}

/** Text as Markdown code. */
export function code(text: string): string {
  return '`' + text + '`';
}

/** A route's required permissions as a reviewer reads them. */
export function list(names: readonly string[]): string {
  return names.length === 0 ? 'no permission (any valid key)' : names.map(code).join(', ');
}

function describeRoute(route: CompiledRoute): string {
  const served = route.serve ? ', served by the gateway' : `, query ${code(describeQuery(route.query))}, body ${code(describeBody(route.body))}`;
  return `${code(routeKey(route))} (${code(route.id)}): requires ${list(route.permissions)}${served}`;
}

/**
 * What changed between two valid policies, as Markdown for a pull request. Removing a permission
 * from a route, or adding a route, widens access; both are called out, since a reviewer reading a
 * diff of YAML can easily miss them.
 */
export function diffPolicies(oldPolicy: CompiledPolicy, newPolicy: CompiledPolicy, oldName: string, newName: string): string {
  const out: string[] = [`## Policy changes: ${code(oldName)} → ${code(newName)}`, ''];
  const section = (title: string, lines: string[]) => {
    if (lines.length === 0) return;
    out.push(`### ${title}`, '', ...lines, '');
  };
  const oldRoutes = new Map(oldPolicy.routes.map((r) => [routeKey(r), r]));
  const newRoutes = new Map(newPolicy.routes.map((r) => [routeKey(r), r]));
  section('Routes added (new access)', newPolicy.routes.filter((r) => !oldRoutes.has(routeKey(r))).map((r) => `- ⚠️ ${describeRoute(r)}`));
  section('Routes removed', oldPolicy.routes.filter((r) => !newRoutes.has(routeKey(r))).map((r) => `- ${describeRoute(r)}`));
  section('Routes changed', newPolicy.routes.flatMap((route) => {
    const before = oldRoutes.get(routeKey(route));
    const notes = before === undefined ? [] : routeChanges(before, route);
    return notes.length === 0 ? [] : [`- ${code(routeKey(route))}: ${notes.join('; ')}`];
  }));
  section('Permission catalogue', catalogueChanges(oldPolicy, newPolicy));
  section('Tenant fields', [
    ...[...oldPolicy.tenantFields].filter((name) => !newPolicy.tenantFields.has(name)).map((name) => `- **removed tenant field ${code(name)}: a body may now name the tenant so, loosens access**`),
    ...[...newPolicy.tenantFields].filter((name) => !oldPolicy.tenantFields.has(name)).map((name) => `- added tenant field ${code(name)} (tightens)`),
  ]);
  section('Upstream', upstreamChanges(oldPolicy, newPolicy));
  if (out.length === 2) out.push('No changes that affect access, routing or the upstream.', '');
  return out.join('\n');
}

/** What changed on one route kept at its method and path, each note flagged as it loosens or tightens. */
function routeChanges(before: CompiledRoute, route: CompiledRoute): string[] {
  const added = route.permissions.filter((p) => !before.permissions.includes(p));
  const removed = before.permissions.filter((p) => !route.permissions.includes(p));
  const notes: string[] = [];
  if (removed.length > 0) notes.push(`**removed ${list(removed)}: loosens access**`);
  if (added.length > 0) notes.push(`added ${list(added)} (tightens access)`);
  if (before.id !== route.id) notes.push(`renamed ${code(before.id)} → ${code(route.id)} (metrics and logs change)`);
  if (before.serve !== route.serve) notes.push(route.serve ? 'now served by the gateway' : '⚠️ now proxied to the upstream');
  const types = (r: CompiledRoute) => new Map(r.template.segments.flatMap((seg) => (seg.kind === 'param' ? [[seg.name, seg.type] as const] : [])));
  const beforeTypes = types(before);
  for (const [name, type] of types(route)) {
    const was = beforeTypes.get(name);
    if (was === undefined || was.text === type.text) continue;
    if (valueTakesAllOf(was, type)) notes.push(`parameter :${name} is now ${code(type.text)} (was ${code(was.text)}; narrower)`);
    else notes.push(`⚠️ parameter :${name} is now ${code(type.text)} (was ${code(was.text)}): review what it lets through`);
  }
  const queryNote = queryChange(before.query, route.query);
  if (queryNote !== null) notes.push(queryNote);
  notes.push(...bodyChanges(before.body, route.body));
  const rateNote = rateChange(before.rateLimit, route.rateLimit);
  if (rateNote !== null) notes.push(rateNote);
  return notes;
}

function catalogueChanges(oldPolicy: CompiledPolicy, newPolicy: CompiledPolicy): string[] {
  const oldCatalogue = new Map(oldPolicy.permissions.map((p) => [p.name, p.description]));
  const newCatalogue = new Map(newPolicy.permissions.map((p) => [p.name, p.description]));
  const catalogue: string[] = [];
  for (const [name, description] of newCatalogue) {
    const before = oldCatalogue.get(name);
    if (before === undefined) catalogue.push(`- added ${code(name)}: ${freeText(description)}`);
    else if (before !== description) catalogue.push(`- ${code(name)}: description ${freeText(before)} → ${freeText(description)}`);
  }
  for (const name of oldCatalogue.keys()) {
    if (!newCatalogue.has(name)) catalogue.push(`- removed ${code(name)} (keys that carry it keep it, but it grants nothing)`);
  }
  return catalogue;
}

function upstreamChanges(oldPolicy: CompiledPolicy, newPolicy: CompiledPolicy): string[] {
  const upstream: string[] = [];
  if (oldPolicy.acquirerHeader !== newPolicy.acquirerHeader) {
    upstream.push(`- ⚠️ acquirer header ${code(oldPolicy.acquirerHeader)} → ${code(newPolicy.acquirerHeader)} (the upstream must read the new one)`);
  }
  // What each listed upstream status is answered with, before and after: an entry that changes no answer
  // (a 401 listed as the 502 it always is, a status mapped to itself) is no change.
  const statuses = [...new Set([...oldPolicy.upstreamStatusMap.keys(), ...newPolicy.upstreamStatusMap.keys()])].sort();
  for (const status of statuses) {
    const before = answerTo(status, oldPolicy);
    const after = answerTo(status, newPolicy);
    if (before === after) continue;
    const line = `an upstream ${status} is answered ${after} (was ${before})`;
    upstream.push(after === EXPLAINED ? `- **${line}: loosens what reaches clients**` : `- ${line}`);
  }
  return upstream;
}

/**
 * Characters that change how text around them shows without showing themselves: bidi controls, zero
 * widths, line separators, and the control characters JSON leaves as they are (DEL and C1, such as
 * U+009B, a terminal's control sequence introducer).
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * A description, the one free text of a policy, as it shows in rendered Markdown: quoted, on one line,
 * and with no HTML of its own (`<!--` would hide the rest of the review, an acquirer-header change in it).
 * Invisible characters are spelled out as `\uXXXX`: a right-to-left override would show the text
 * after it reversed, and with it whatever a reviewer reads next on the line.
 */
function freeText(text: string): string {
  return JSON.stringify(text)
    .replace(INVISIBLE, (c) => [...Array(c.length).keys()].map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''))
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;');
}

/** A route's query declaration as a reviewer reads it. */
function describeQuery(query: CompiledRoute['query']): string {
  if (query === undefined) return 'any (unchecked)';
  if (query.size === 0) return 'none';
  return [...query].map(([name, param]) => `${name}: ${param.type.text}`).sort().join(', ');
}

/** A route's body declaration as a reviewer reads it. */
function describeBody(body: BodyRule | undefined): string {
  return body === undefined ? 'none' : `${[...body.contentTypes].join(' | ')} ≤ ${body.maxBytes} bytes`;
}

/** What changed in the body a route takes. Taking one, a larger one, or another media type loosens it. */
function bodyChanges(before: BodyRule | undefined, after: BodyRule | undefined): string[] {
  if (before === undefined && after === undefined) return [];
  if (before === undefined) return [`**now takes a body, ${code(describeBody(after))}: loosens what reaches the upstream**`];
  if (after === undefined) return [`takes no body any more (was ${code(describeBody(before))}; tightens)`];
  const notes: string[] = [];
  if (after.maxBytes > before.maxBytes) notes.push(`**max_bytes raised ${before.maxBytes} → ${after.maxBytes}: loosens what reaches the upstream**`);
  if (after.maxBytes < before.maxBytes) notes.push(`max_bytes lowered ${before.maxBytes} → ${after.maxBytes} (tightens)`);
  const added = [...after.contentTypes].filter((type) => !before.contentTypes.has(type));
  const removed = [...before.contentTypes].filter((type) => !after.contentTypes.has(type));
  if (added.length > 0) notes.push(`**now accepts ${added.map(code).join(', ')}: loosens what reaches the upstream**`);
  if (removed.length > 0) notes.push(`no longer accepts ${removed.map(code).join(', ')} (tightens)`);
  return notes;
}

/** A key's rate on a route as a reviewer reads it, and whose budget it is. */
function describeRate(rate: RateLimit | undefined): string {
  return rate === undefined ? 'none' : `${rate.perSecond}/s, burst ${rate.burst} (${rate.budget === 'default' ? 'default' : 'own'})`;
}

/**
 * What changed in a key's rate on a route; null when nothing did. None, a faster rate, a larger
 * burst, or a budget of its own where it shared the default's (a second budget beside it) loosens it.
 */
function rateChange(before: RateLimit | undefined, after: RateLimit | undefined): string | null {
  const [was, now] = [describeRate(before), describeRate(after)];
  if (was === now) return null;
  const ownNow = before?.budget === 'default' && after?.budget !== 'default';
  const looser = after === undefined || (before !== undefined && (after.perSecond > before.perSecond || after.burst > before.burst || ownNow));
  const text = `rate per key ${code(now)} (was ${code(was)})`;
  return looser ? `**${text}: loosens what reaches the upstream**` : text;
}

/** What changed in the query a route takes; null when nothing did. Taking more, or any, loosens it. */
function queryChange(before: CompiledRoute['query'], after: CompiledRoute['query']): string | null {
  const was = describeQuery(before);
  const now = describeQuery(after);
  if (was === now) return null;
  const wider =
    after === undefined ||
    (before !== undefined &&
      [...after].some(([name, param]) => {
        const was = before.get(name)?.type;
        return was === undefined || !valueTakesAllOf(was, param.type);
      }));
  const text = `query ${code(now)} (was ${code(was)})`;
  return wider ? `**${text}: loosens what reaches the upstream**` : text;
}

/** The effective route table, as a Markdown table. */
export function routeTable(policy: CompiledPolicy): string {
  const rows = policy.routes.map((r) => {
    const params = r.template.segments.flatMap((s) => (s.kind === 'param' ? [`${s.name}: ${s.type.text}`] : []));
    return `| ${code(r.id)} | ${r.method} | ${code(r.path)} | ${params.join(', ') || '–'} | ${describeQuery(r.query)} | ${describeBody(r.body)} | ${list(r.permissions)} | ${r.rateLimit === undefined ? '–' : describeRate(r.rateLimit)} | ${r.serve ? 'gateway' : 'upstream'} |`;
  });
  return [
    `Acquirer header: ${code(policy.acquirerHeader)}; tenant fields ${[...policy.tenantFields].map(code).join(', ') || 'none'}; policy sha256 ${policy.contentHash}`,
    '',
    '| route | method | path | parameters | query | body | permissions (all required) | rate per key | answered by |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
