/**
 * @module
 * `policy explain`: how the gateway would judge one request, step by step in the pipeline's order
 * (app/pipeline.ts), with the request path's own decisions: matchRoute, missingPermissions,
 * queryRefusal, the key's whitelist, and the one error table. Pure: nothing is sent anywhere.
 */
import { ERROR_CODES, type ErrorCode, type ErrorStatus } from '../errors/codes.js';
import { errorBody } from '../errors/error-response.js';
import type { IpAddress, IpAllowlist } from '../net/ip-allowlist.js';
import type { CompiledPolicy, CompiledRoute } from './compile.js';
import { describeQueryRefusal, queryRefusal } from './match-query.js';
import { matchRoute } from './match-route.js';
import { missingPermissions } from './route-access.js';

/** The key as the request path reads its record (keys/key-verdict.ts), with its whitelist as written. */
export type ExplainedKey =
  | { readonly kind: 'disabled'; readonly id: string; readonly acquirerId: string; readonly disabledAt: string }
  | {
      readonly kind: 'valid';
      readonly id: string;
      readonly acquirerId: string;
      readonly permissions: ReadonlySet<string>;
      /** null: any address. */
      readonly allowlist: IpAllowlist | null;
      /** The whitelist's entries, to name them. */
      readonly allowedIps: readonly string[];
    };

export interface ExplainedRequest {
  readonly method: string;
  /** The raw request-target, as a client would send it. */
  readonly target: string;
  /** The client's address as the gateway would judge it; undefined: not given, not judged. */
  readonly from?: IpAddress | undefined;
}

/** The pipeline's steps explain can speak of, by their names there (the request guard aside). */
export type StepName = 'apiKeyAuth' | 'ipWhitelist' | 'routeMatch' | 'permissions' | 'requestShape' | 'rateLimit' | 'acquirerShare' | 'requestBody' | 'dispatch';

export interface Step {
  readonly step: StepName;
  /** What it judges, as the output names it. */
  readonly title: string;
  readonly outcome: 'passes' | 'refuses' | 'not judged' | 'not reached';
  readonly says: string;
  /** A step not judged: the refusal it could still give. */
  readonly unless?: string;
}

/** A header the upstream receives, as the gateway sets it. */
export interface UpstreamHeader {
  readonly name: string;
  readonly value: string;
}

/**
 * The headers ACQUIRER_SIGNING_SECRET adds to a forwarded request (the key id and the signature), as
 * the proxy computes them for `method`, `target` and `key`, now. Given by the caller: policy/ knows
 * nothing of the proxy or its secrets.
 */
export type UpstreamSigning = (method: string, target: string, key: { readonly id: string; readonly acquirerId: string }) => readonly UpstreamHeader[];

export type Verdict =
  | { readonly kind: 'refused'; readonly step: StepName; readonly code: ErrorCode; readonly status: ErrorStatus; readonly body: string }
  | { readonly kind: 'served'; readonly status: 200; readonly body: string }
  | {
      readonly kind: 'forwarded';
      readonly method: string;
      readonly target: string;
      readonly header: UpstreamHeader;
      /** With ACQUIRER_SIGNING_SECRET: the key id and signature headers, as computed when explained. */
      readonly signed?: readonly UpstreamHeader[];
    };

export interface Explanation {
  readonly steps: readonly Step[];
  readonly verdict: Verdict;
}

/** A refusal as the client receives it: the status and the exact body of the error table. */
export function answerOf(code: ErrorCode): string {
  const status = ERROR_CODES[code].status;
  return `${status} ${errorBody(status).toString()}`;
}

const names = (items: Iterable<string>) => [...items].join(', ');

/** A step that refused: the steps after it are not reached. */
class Refused extends Error {
  readonly step: StepName;
  readonly code: ErrorCode;

  constructor(step: StepName, code: ErrorCode) {
    super(`${step} refuses: ${code}`);
    this.step = step;
    this.code = code;
  }
}

/** The steps judged so far; `refuse` ends the judging. */
class Judge {
  readonly steps: Step[] = [];

  note(step: Step): void {
    this.steps.push(step);
  }

  refuse(step: Omit<Step, 'outcome'>, code: ErrorCode): never {
    this.steps.push({ ...step, outcome: 'refuses' });
    throw new Refused(step.step, code);
  }
}

/**
 * Judges `request` as the gateway would for `key` under `policy`, up to the step that decides it.
 * Steps that need what explain does not have (the client's address without `from`, the body, the
 * load) are said to be not judged, with the refusal each could still give. `sign`: the gateway signs
 * what it forwards (ACQUIRER_SIGNING_SECRET), and a forwarded verdict lists those headers too.
 * @example explainRequest(policy, key, { method: 'GET', target: '/v1/acquirer/eod_statements?page=2' })
 */
export function explainRequest(policy: CompiledPolicy, key: ExplainedKey, request: ExplainedRequest, sign?: UpstreamSigning): Explanation {
  const judge = new Judge();
  const { steps } = judge;
  let route: CompiledRoute;
  let valid: ValidKey;
  try {
    valid = judgeKey(key, judge);
    judgeAddress(valid, request.from, judge);
    route = judgeRoute(policy, request, judge);
    judgePermissions(valid, route, judge);
    judgeQuery(route, request.target, judge);
    judgeBodyHead(route, judge);
    judgeRate(route, valid, judge);
    judgeShare(route, valid, judge);
    judgeBody(policy, route, judge);
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    const { step, code } = err;
    const status = ERROR_CODES[code].status;
    return { steps: [...steps, ...notReached(steps.length)], verdict: { kind: 'refused', step, code, status, body: errorBody(status).toString() } };
  }
  if (route.serve === 'permission_catalogue') {
    steps.push({ step: 'dispatch', title: 'answer', outcome: 'passes', says: 'answered by the gateway itself: the permission catalogue; nothing goes upstream' });
    return { steps, verdict: { kind: 'served', status: 200, body: policy.catalogueBody.toString() } };
  }
  const signing = sign === undefined ? '' : ', signed (ACQUIRER_SIGNING_SECRET)';
  steps.push({ step: 'dispatch', title: 'answer', outcome: 'passes', says: `proxied upstream: the request-target exactly as sent, the acquirer header set from the key${signing}` });
  const forwarded = { kind: 'forwarded', method: request.method, target: request.target, header: { name: policy.acquirerHeader, value: key.acquirerId } } as const;
  return { steps, verdict: sign === undefined ? forwarded : { ...forwarded, signed: sign(request.method, request.target, valid) } };
}

type ValidKey = Extract<ExplainedKey, { kind: 'valid' }>;

/** What explain judges, in the pipeline's order (the request-shape step judges the query, then the body's head). */
const ORDER: readonly (readonly [StepName, string])[] = [
  ['apiKeyAuth', 'key'],
  ['ipWhitelist', 'client address'],
  ['routeMatch', 'route'],
  ['permissions', 'permission'],
  ['requestShape', 'query'],
  ['requestShape', 'body (head)'],
  ['rateLimit', 'rate'],
  ['acquirerShare', "acquirer's share"],
  ['requestBody', 'body'],
  ['dispatch', 'answer'],
];

/** The steps after the first `judged`, which one refused. */
function notReached(judged: number): Step[] {
  return ORDER.slice(judged).map(([step, title]) => ({ step, title, outcome: 'not reached', says: '' }));
}

/** Step 1 (api-key-auth): a disabled key is refused as the gateway refuses it. */
function judgeKey(key: ExplainedKey, judge: Judge): ValidKey {
  if (key.kind === 'disabled') {
    judge.refuse({ step: 'apiKeyAuth', title: 'key', says: `${key.id} (acquirer ${key.acquirerId}) was disabled at ${key.disabledAt}` }, 'API_KEY_DISABLED');
  }
  const held = key.permissions.size === 0 ? 'no permission' : `permissions ${names(key.permissions)}`;
  judge.note({ step: 'apiKeyAuth', title: 'key', outcome: 'passes', says: `${key.id} is enabled: acquirer ${key.acquirerId}, ${held}` });
  return key;
}

/** Step 2 (ip-whitelist): only for a key with a whitelist. */
function judgeAddress(key: ValidKey, from: IpAddress | undefined, judge: Judge): void {
  const step = 'ipWhitelist';
  const title = 'client address';
  const whitelist = names(key.allowedIps);
  if (key.allowlist === null) return judge.note({ step, title, outcome: 'passes', says: 'the key has no IP whitelist: any address' });
  if (from === undefined) {
    const unless = `from outside ${whitelist}: ${answerOf('IP_NOT_ALLOWED')}`;
    return judge.note({ step, title, outcome: 'not judged', says: `no --from given; the key's whitelist is ${whitelist}`, unless });
  }
  if (key.allowlist.contains(from)) return judge.note({ step, title, outcome: 'passes', says: `${from.toString()} is inside the key's whitelist (${whitelist})` });
  judge.refuse({ step, title, says: `${from.toString()} is outside the key's whitelist (${whitelist})` }, 'IP_NOT_ALLOWED');
}

/** Step 3 (route-match): the method and the raw target, with the request path's matcher. */
function judgeRoute(policy: CompiledPolicy, request: ExplainedRequest, judge: Judge): CompiledRoute {
  const step = 'routeMatch';
  const title = 'route';
  const match = matchRoute(policy, request.method, request.target);
  if (match.kind === 'matched') {
    judge.note({ step, title, outcome: 'passes', says: `${match.route.id}: ${match.route.method} ${match.route.path}` });
    return match.route;
  }
  if (match.kind === 'non_canonical') {
    const form = 'dot or empty segments, a trailing slash, %, \\ or ; in the path, a fragment, absolute or asterisk form, a query not of visible ASCII';
    judge.refuse({ step, title, says: `the target is not in canonical form (${form}): never forwarded` }, 'NON_CANONICAL_PATH');
  }
  // The same matcher, asked with the policy's other methods: a path declared for another method only.
  const others = [...policy.routesByMethod.keys()].filter((m) => m !== request.method).flatMap((m) => {
    const other = matchRoute(policy, m, request.target);
    return other.kind === 'matched' ? [`${m} (${other.route.id})`] : [];
  });
  const path = pathOf(request.target);
  const says = others.length === 0 ? `no route of the policy matches ${request.method} ${path}` : `no ${request.method} route matches ${path}; it is a route for ${names(others)}`;
  return judge.refuse({ step, title, says }, 'ROUTE_NOT_FOUND');
}

function pathOf(target: string): string {
  const q = target.indexOf('?');
  return q === -1 ? target : target.slice(0, q);
}

/** Step 4 (permissions): every permission the route requires. */
function judgePermissions(key: ValidKey, route: CompiledRoute, judge: Judge): void {
  const step = 'permissions';
  const title = 'permission';
  if (route.permissions.length === 0) return judge.note({ step, title, outcome: 'passes', says: 'the route requires none: any valid key' });
  const missing = missingPermissions(key.permissions, route.permissions);
  if (missing.length === 0) return judge.note({ step, title, outcome: 'passes', says: `the key carries ${names(route.permissions)}` });
  judge.refuse({ step, title, says: `the key lacks ${names(missing)} (the route requires ${names(route.permissions)})` }, 'PERMISSION_DENIED');
}

/** Step 5 (request-shape), its query: only what the route declares. */
function judgeQuery(route: CompiledRoute, target: string, judge: Judge): void {
  const step = 'requestShape';
  const title = 'query';
  if (route.query === undefined) {
    const says = route.serve === undefined ? 'not checked: the route forwards any query (query: any)' : 'any, unread: the gateway answers the route itself';
    return judge.note({ step, title, outcome: 'passes', says });
  }
  const declared = route.query.size === 0 ? 'none' : [...route.query].map(([name, param]) => `${name}: ${param.type.text}`).join(', ');
  const refusal = queryRefusal(route, target);
  if (refusal !== null) judge.refuse({ step, title, says: `${describeQueryRefusal(refusal)} (the route takes ${declared})` }, 'QUERY_NOT_ALLOWED');
  const given = target.includes('?') ? 'every parameter declared and of its type, none too often' : 'none given';
  judge.note({ step, title, outcome: 'passes', says: `${given} (the route takes ${declared})` });
}

/** Step 5 (request-shape), the body as a request's head shows it: the one the route takes, or none. */
function judgeBodyHead(route: CompiledRoute, judge: Judge): void {
  const step = 'requestShape';
  const title = 'body (head)';
  if (route.body === undefined) {
    return judge.note({ step, title, outcome: 'passes', says: `none given, and the route takes none (one is refused: ${answerOf('BAD_REQUEST')})` });
  }
  const types = names(route.body.contentTypes);
  judge.note({
    step, title, outcome: 'not judged',
    says: `no body given; the route takes ${types}, at most ${route.body.maxBytes} bytes`,
    unless: `a Content-Type other than ${types}, or none: ${answerOf('UNSUPPORTED_MEDIA_TYPE')}; a Content-Length over ${route.body.maxBytes}: ${answerOf('PAYLOAD_TOO_LARGE')}`,
  });
}

/** Step 6 (rate-limit): the budget the key takes from; whether any is left, explain cannot see. */
function judgeRate(route: CompiledRoute, key: ValidKey, judge: Judge): void {
  const [step, title, rate] = ['rateLimit', 'rate', route.rateLimit] as const;
  if (rate === undefined) return judge.note({ step, title, outcome: 'passes', says: 'the policy declares no rate for the route' });
  const budget = rate.budget === 'default' ? "the policy's default budget (rate_limits.default)" : "the route's own budget";
  const says = `${key.id} may make ${rate.perSecond}/s with a burst of ${rate.burst}, from ${budget}`;
  judge.note({ step, title, outcome: 'not judged', says, unless: `over it: ${answerOf('RATE_LIMITED')}, with Retry-After` });
}

/** Step 7 (acquirer-share): depends on the requests under way, which explain cannot see. */
function judgeShare(route: CompiledRoute, key: ValidKey, judge: Judge): void {
  const step = 'acquirerShare';
  const title = "acquirer's share";
  if (route.serve !== undefined) return judge.note({ step, title, outcome: 'passes', says: 'none taken: the gateway answers the route itself' });
  judge.note({
    step, title, outcome: 'not judged',
    says: 'depends on the requests under way',
    unless: `${key.acquirerId} with ACQUIRER_MAX_IN_FLIGHT requests under way in the process: ${answerOf('ACQUIRER_BUSY')}`,
  });
}

/** Step 8 (request-body): read whole and checked as JSON. */
function judgeBody(policy: CompiledPolicy, route: CompiledRoute, judge: Judge): void {
  const step = 'requestBody';
  const title = 'body';
  if (route.body === undefined) return judge.note({ step, title, outcome: 'passes', says: 'nothing to read' });
  judge.note({
    step, title, outcome: 'not judged',
    says: `read whole, then one JSON value with no member named ${names(policy.tenantFields)} at any depth`,
    unless: `longer than ${route.body.maxBytes} bytes: ${answerOf('PAYLOAD_TOO_LARGE')}; not such JSON: ${answerOf('MALFORMED_BODY')}; not all there within REQUEST_TIMEOUT_MS: ${answerOf('REQUEST_TIMEOUT')}`,
  });
}
