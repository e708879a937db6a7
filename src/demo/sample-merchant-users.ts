/**
 * @module
 * Merchant users of the sample upstream: create (an invitation), list, retrieve, update and disable,
 * under `/v1/acquirer/merchants/:merchant_id/users`, scoped by the caller's acquirer.
 */
import type { SampleAuditLog } from './sample-audit-log.js';
import { invalid, jsonReply, refuse, type SampleRequest, type SampleRoute } from './sample-http.js';
import { newId } from './sample-ids.js';
import type { MerchantDirectory } from './sample-merchants.js';
import { parseQuery } from './sample-query.js';
import { userChanges, newUserFields } from './sample-user-fields.js';

interface MerchantUser {
  readonly id: string;
  readonly acquirerId: string;
  readonly merchantId: string;
  name: string;
  readonly email: string;
  description: string | null;
  permissions: string[];
  status: 'invited' | 'disabled';
  readonly createdAt: string;
  updatedAt: string;
}

/** The fields `sort[field]` may name, and the user's value each sorts by. */
const SORT_KEYS = {
  name: (u: MerchantUser) => u.name,
  email: (u: MerchantUser) => u.email,
  created_at: (u: MerchantUser) => u.createdAt,
  updated_at: (u: MerchantUser) => u.updatedAt,
} as const;

// Names sort as a reader expects ("bob" between "Alice" and "Carol"); timestamps compare alike.
const collator = new Intl.Collator('en');

function userJson(u: MerchantUser) {
  return {
    id: u.id,
    merchant_id: u.merchantId,
    name: u.name,
    email: u.email,
    description: u.description,
    permissions: u.permissions,
    status: u.status,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
  };
}

/** The comparison `sort[field]` and `sort[dir]` ask for (default: oldest first); other values are a 422. */
function sortOrder(query: string): (a: MerchantUser, b: MerchantUser) => number {
  const params = parseQuery(query);
  const field = params.get('sort[field]') ?? 'created_at';
  const dir = params.get('sort[dir]') ?? 'asc';
  if (!Object.hasOwn(SORT_KEYS, field)) throw invalid({ 'sort[field]': [`must be one of ${Object.keys(SORT_KEYS).join(', ')}`] });
  if (dir !== 'asc' && dir !== 'desc') throw invalid({ 'sort[dir]': ['must be asc or desc'] });
  const key = SORT_KEYS[field as keyof typeof SORT_KEYS];
  const sign = dir === 'asc' ? 1 : -1;
  return (a, b) => sign * collator.compare(key(a), key(b));
}

export function merchantUserRoutes(merchants: MerchantDirectory, audit: SampleAuditLog, now: () => Date): SampleRoute[] {
  const users: MerchantUser[] = [];
  /** The user named by the path, after the merchant's check: another acquirer's answers 403, as a statement does. */
  const find = (req: SampleRequest): MerchantUser => {
    const [merchantId, id] = req.params;
    merchants.assertOwn(req.acquirerId, merchantId!);
    const user = users.find((u) => u.id === id);
    if (user && user.acquirerId !== req.acquirerId) throw refuse(403, 'forbidden');
    if (!user || user.merchantId !== merchantId) throw refuse(404, 'user not found');
    return user;
  };
  const changed = (req: SampleRequest, user: MerchantUser, actionType: 'update' | 'disable') => {
    user.updatedAt = now().toISOString();
    audit.record(req.acquirerId, { actionType, subjectType: 'merchant_user', subjectId: user.id }, new Date(user.updatedAt));
    return jsonReply(200, userJson(user));
  };
  const collection = (req: SampleRequest) => {
    merchants.assertOwn(req.acquirerId, req.params[0]!);
    return users.filter((u) => u.merchantId === req.params[0]);
  };

  const create = (req: SampleRequest) => {
    const [merchantId] = req.params;
    const taken = collection(req).map((u) => u.email);
    const fields = newUserFields(req.body, taken);
    const at = now().toISOString();
    const user: MerchantUser = { id: newId(), acquirerId: req.acquirerId, merchantId: merchantId!, ...fields, status: 'invited', createdAt: at, updatedAt: at };
    users.push(user);
    audit.record(req.acquirerId, { actionType: 'create', subjectType: 'merchant_user', subjectId: user.id }, new Date(at));
    return jsonReply(201, userJson(user), { location: `/v1/acquirer/merchants/${encodeURIComponent(user.merchantId)}/users/${user.id}` });
  };
  const update = (req: SampleRequest) => {
    const user = find(req);
    Object.assign(user, userChanges(req.body));
    return changed(req, user, 'update');
  };
  const disable = (req: SampleRequest) => {
    const user = find(req);
    user.status = 'disabled';
    return changed(req, user, 'disable');
  };

  return [
    {
      pattern: /^\/v1\/acquirer\/merchants\/([^/]+)\/users$/,
      methods: { GET: (req) => jsonReply(200, collection(req).sort(sortOrder(req.query)).map(userJson)), POST: create },
    },
    { pattern: /^\/v1\/acquirer\/merchants\/([^/]+)\/users\/([^/]+)$/, methods: { GET: (req) => jsonReply(200, userJson(find(req))), PUT: update } },
    { pattern: /^\/v1\/acquirer\/merchants\/([^/]+)\/users\/([^/]+)\/disable$/, methods: { PUT: disable } },
  ];
}
