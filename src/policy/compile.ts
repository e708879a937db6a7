import { isErrorStatus, type ErrorStatus } from '../errors/codes.js';
import { EXCHANGE_HEADER, FORWARDED_REQUEST_HEADERS, neverForwarded } from '../net/header-names.js';
import { UNMATCHED_ROUTE } from '../observability/metrics/labels.js';
import { mapUpstreamStatus, NEVER_PASSED_ON } from '../errors/upstream-status.js';
import { UNCHECKED_QUERY, type PolicyDocument } from './schema.js';
import { compileValueType, valueCheck, type ValueType } from './value-types.js';
import { compileRateLimit, DEFAULT_BUDGET, type RateLimit } from './rate-limit.js';
import { compileTemplate, overlappingPath, TemplateError, type CompiledTemplate } from './template.js';

export interface Permission {
  readonly name: string;
  readonly description: string;
}

/** A declared query parameter: its type, and the check of a decoded value against it. */
export interface QueryParam {
  readonly type: ValueType;
  readonly accepts: (value: string) => boolean;
}

/** The body a route takes (docs/policy.md, "Bodies"). */
export interface BodyRule {
  /** Media types without parameters, lower case. */
  readonly contentTypes: ReadonlySet<string>;
  readonly maxBytes: number;
}

export interface CompiledRoute {
  readonly id: string;
  readonly method: string;
  /** The template as written in the policy. */
  readonly path: string;
  readonly template: CompiledTemplate;
  /** The query parameters it takes, by name (none when the policy declares none); undefined: not checked (`query: any`). */
  readonly query: ReadonlyMap<string, QueryParam> | undefined;
  /** The body it takes; undefined: none (a request with one is refused). */
  readonly body: BodyRule | undefined;
  readonly permissions: readonly string[];
  readonly serve: 'permission_catalogue' | undefined;
  /** The rate a key is held to here: the route's own, or the policy's default; undefined: none. */
  readonly rateLimit: RateLimit | undefined;
}

export interface CompiledPolicy {
  /** SHA-256 of the file's bytes; identifies the loaded policy in logs and metrics. */
  readonly contentHash: string;
  /** Lower case, as Node presents incoming header names. */
  readonly acquirerHeader: string;
  readonly routes: readonly CompiledRoute[];
  readonly routesByMethod: ReadonlyMap<string, readonly CompiledRoute[]>;
  readonly upstreamStatusMap: ReadonlyMap<number, ErrorStatus>;
  readonly permissions: readonly Permission[];
  readonly permissionNames: ReadonlySet<string>;
  /** Body member names that would name the tenant, lower case (`tenant_fields`). */
  readonly tenantFields: ReadonlySet<string>;
  /** The permission catalogue response, serialised once. */
  readonly catalogueBody: Buffer;
}

/** A problem found in a policy, located by its path in the document (e.g. routes.2.permissions.0). */
export interface PolicyProblem {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

export type CompileResult = { ok: true; policy: CompiledPolicy } | { ok: false; problems: PolicyProblem[] };

/**
 * Headers the gateway itself controls, or that change how a request is framed or routed; the policy
 * cannot name one of them, nor one the gateway strips (neverForwarded), as the identity header.
 */
const RESERVED_HEADERS = new Set([
  'host', 'content-length', 'content-type', 'content-encoding', 'cookie', 'max-forwards', 'range',
  'if-range', 'x-request-id', EXCHANGE_HEADER,
]);

/**
 * A query parameter's name, as it reads decoded: a letter, then letters, digits, `_ . -`, and up to
 * two bracketed parts taken literally (`created_at[gte]`, `sort[field]`, `status[]`).
 */
const QUERY_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,63}(?:\[[A-Za-z0-9_]{0,32}\]){0,2}$/;

type Problem = (path: (string | number)[], message: string) => void;

/**
 * Checks what the schema cannot (references, uniqueness, templates, ambiguity) and builds the
 * structures the request path uses, so that no request ever re-derives them.
 */
export function compilePolicy(doc: PolicyDocument, contentHash: string): CompileResult {
  const problems: PolicyProblem[] = [];
  const problem: Problem = (path, message) => problems.push({ path, message });
  const acquirerHeader = doc.acquirer_header.toLowerCase();
  if (RESERVED_HEADERS.has(acquirerHeader) || neverForwarded(acquirerHeader) || FORWARDED_REQUEST_HEADERS.has(acquirerHeader)) {
    problem(['acquirer_header'], `"${doc.acquirer_header}" is a header the gateway controls; choose another`);
  }
  const permissionNames = new Set<string>();
  doc.permissions.forEach((permission, i) => {
    if (permissionNames.has(permission.name)) problem(['permissions', i, 'name'], `duplicate permission "${permission.name}"`);
    permissionNames.add(permission.name);
  });
  const upstreamStatusMap = compileStatusMap(doc.upstream_status_map, problem);
  const defaultRate = doc.rate_limits && compileRateLimit(DEFAULT_BUDGET, doc.rate_limits.default);
  const routes = compileRoutes(doc.routes, permissionNames, defaultRate, problem);
  if (problems.length > 0) return { ok: false, problems };

  const routesByMethod = new Map<string, CompiledRoute[]>();
  for (const route of routes) {
    const list = routesByMethod.get(route.method) ?? [];
    list.push(route);
    routesByMethod.set(route.method, list);
  }
  const permissions = doc.permissions.map(({ name, description }) => ({ name, description }));
  return {
    ok: true,
    policy: {
      contentHash, acquirerHeader, routes, routesByMethod, upstreamStatusMap, permissions, permissionNames,
      tenantFields: new Set(doc.tenant_fields.map((name) => name.toLowerCase())),
      catalogueBody: Buffer.from(JSON.stringify({ permissions })),
    },
  };
}

/** What each upstream error status is answered with; one that a client could misread is refused. */
function compileStatusMap(map: PolicyDocument['upstream_status_map'], problem: Problem): Map<number, ErrorStatus> {
  const compiled = new Map<number, ErrorStatus>();
  for (const [from, to] of Object.entries(map)) {
    const at = ['upstream_status_map', from];
    if (!/^[45][0-9]{2}$/.test(from)) problem(at, `${from} is not an upstream error status: a key is an HTTP status from 400 to 599`);
    else if (!isErrorStatus(to)) problem(at, `${to} is not a status the gateway has a documented body for`);
    else if (to === NEVER_PASSED_ON) {
      problem(at, `${to} tells a client its own key is invalid, and the upstream never sees the client's key: map an upstream status to 502 instead`);
    } else if (Number(from) === NEVER_PASSED_ON && to !== 502) {
      problem(at, `an upstream ${from} is always answered 502 (it is about the gateway's own standing upstream, never the client's key)`);
    } else compiled.set(Number(from), to);
  }
  // The API document (section 7, rule 3): another acquirer's resource answers exactly as a missing one.
  const for403 = mapUpstreamStatus(403, compiled);
  const for404 = mapUpstreamStatus(404, compiled);
  if (for403 !== for404) {
    problem(
      ['upstream_status_map'],
      `an upstream 403 (another acquirer's resource) would be answered ${for403} and a 404 (none) ${for404}: ` +
        'a resource of another acquirer must look exactly like one that does not exist; map both to one status (403: 404, 404: 404)',
    );
  }
  return compiled;
}

/** Each route checked on its own, then against every earlier route of its method (duplicate or ambiguous). */
function compileRoutes(declared: PolicyDocument['routes'], permissionNames: ReadonlySet<string>, defaultRate: RateLimit | undefined, problem: Problem): CompiledRoute[] {
  const routes: CompiledRoute[] = [];
  const routeIndexes: number[] = [];
  const seenIds = new Map<string, number>();
  declared.forEach((route, i) => {
    const previous = seenIds.get(route.id);
    if (previous !== undefined) problem(['routes', i, 'id'], `duplicate route id "${route.id}" (also routes.${previous})`);
    if (route.id === UNMATCHED_ROUTE) problem(['routes', i, 'id'], `"${UNMATCHED_ROUTE}" is the metrics' name for requests no route matched: choose another id`);
    seenIds.set(route.id, i);
    route.permissions.forEach((name, j) => {
      if (!permissionNames.has(name)) problem(['routes', i, 'permissions', j], `unknown permission "${name}" (not in the catalogue)`);
      if (route.permissions.indexOf(name) !== j) problem(['routes', i, 'permissions', j], `permission "${name}" listed twice`);
    });
    if (route.serve === 'permission_catalogue' && route.method !== 'GET') problem(['routes', i, 'method'], 'the permission catalogue is served for GET only');
    if (route.body !== undefined && (route.method === 'GET' || route.method === 'HEAD')) problem(['routes', i, 'body'], `a ${route.method} request has no body the upstream would read (RFC 9110 §9.3.1): declare none`);
    if (route.body !== undefined && route.serve !== undefined) problem(['routes', i, 'body'], 'a route the gateway answers itself takes no body');
    if (route.rate_limit !== undefined && route.id === DEFAULT_BUDGET) problem(['routes', i, 'id'], `"${DEFAULT_BUDGET}" names the default rate in the RateLimit headers: a route with a rate of its own needs another id`);
    const query = declaredQuery(route, i, problem);
    const params = Object.fromEntries(Object.entries(route.params ?? {}).map(([name, spec]) => [name, compileValueType(spec)]));
    for (const [name, type] of Object.entries(params)) {
      if (type.maxCount > 1) problem(['routes', i, 'params', name], 'a path parameter is given once: max_count is for query parameters');
    }
    let template: CompiledTemplate;
    try {
      template = compileTemplate(route.path, params);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      return void problem(['routes', i, 'path'], `bad path template: ${err.message}`);
    }
    routes.forEach((other, j) => checkOverlap(route, i, template, other, routeIndexes[j]!, problem));
    routeIndexes.push(i);
    const body = route.body && { contentTypes: new Set(route.body.content_types), maxBytes: route.body.max_bytes };
    const rateLimit = route.rate_limit === undefined ? defaultRate : compileRateLimit(route.id, route.rate_limit);
    routes.push({ id: route.id, method: route.method, path: route.path, template, query, body, permissions: route.permissions, serve: route.serve, rateLimit });
  });
  return routes;
}

/**
 * The query parameters a route takes. Absent: none, for a route that goes upstream; a route the
 * gateway answers itself forwards nothing, and its clients may add what they like (a cache-buster).
 */
function declaredQuery(route: PolicyDocument['routes'][number], i: number, problem: Problem): ReadonlyMap<string, QueryParam> | undefined {
  const declared = route.query === UNCHECKED_QUERY || (route.query === undefined && route.serve !== undefined) ? undefined : (route.query ?? {});
  if (declared === undefined) return undefined;
  for (const name of Object.keys(declared)) {
    if (!QUERY_NAME.test(name)) problem(['routes', i, 'query', name], 'a query parameter name is a letter, then up to 63 letters, digits, _ . or -, then up to two [parts] of letters, digits and _');
  }
  return new Map(
    Object.entries(declared).map(([name, spec]) => {
      const type = compileValueType(spec);
      return [name, { type, accepts: valueCheck(type) }];
    }),
  );
}

/** Two routes of one method that could match the same path: refused, with a path both match. */
function checkOverlap(route: PolicyDocument['routes'][number], i: number, template: CompiledTemplate, other: CompiledRoute, j: number, problem: Problem): void {
  if (other.method !== route.method) return;
  let witness: string | null;
  try {
    witness = overlappingPath(other.template, template);
  } catch (err) {
    // The automata have a size limit (refa): two paths of dozens of parameters each reach it.
    return void problem(['routes', i, 'path'], `${route.method} ${route.path} is too complex to compare with route "${other.id}" (routes.${j}): ${(err as Error).message}`);
  }
  if (witness === null) return;
  const kind = other.path === route.path ? 'duplicates' : 'is ambiguous with';
  problem(['routes', i, 'path'], `${route.method} ${route.path} ${kind} route "${other.id}" (routes.${j}): both match ${witness}`);
}
