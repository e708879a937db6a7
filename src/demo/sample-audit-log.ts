/**
 * @module
 * The audit trail of the sample upstream: each acquirer's writes, newest first, with the API's
 * countless pagination. It starts with one "merchant created" entry per seeded merchant, so a fresh
 * quickstart has something to list.
 */
import { jsonReply, refuse, type SampleRoute } from './sample-http.js';
import { newId, uuidFrom } from './sample-ids.js';
import type { SampleMerchants } from './sample-merchants.js';
import { instantParam, integerParam, parseQuery } from './sample-query.js';

/** Page size of the list when `items` is not given, and the most `items` may ask for. */
export const AUDIT_LOG_DEFAULT_ITEMS = 25;
export const AUDIT_LOG_MAX_ITEMS = 100;

/** A write to record: what was done to which record. */
export interface AuditAction {
  readonly actionType: 'create' | 'update' | 'disable' | 'delete';
  /** `merchant_user`, `payment_control`…; with `actionType` it names the action (`merchant_user.create`). */
  readonly subjectType: string;
  readonly subjectId: string;
}

interface AuditEntry extends AuditAction {
  readonly id: string;
  readonly acquirerId: string;
  readonly at: number;
  /** Order of recording, which breaks ties between entries of the same millisecond. */
  readonly seq: number;
}

export interface SampleAuditLog {
  /** Appends `action`, done by `acquirerId`'s API key at `at`. */
  record(acquirerId: string, action: AuditAction, at: Date): void;
  readonly routes: readonly SampleRoute[];
}

/** Filters the list takes as plain equality, by query name and entry field. */
const EQUALITY_FILTERS = [
  ['action_type', (e: AuditEntry) => e.actionType],
  ['action_name', (e: AuditEntry) => `${e.subjectType}.${e.actionType}`],
  ['subject_type', (e: AuditEntry) => e.subjectType],
  ['subject_id', (e: AuditEntry) => e.subjectId],
  ['performer_type', () => 'api_key'],
] as const;

function entryJson(e: AuditEntry) {
  return {
    id: e.id,
    performer_type: 'api_key',
    action_type: e.actionType,
    action_name: `${e.subjectType}.${e.actionType}`,
    subject_type: e.subjectType,
    subject_id: e.subjectId,
    created_at: new Date(e.at).toISOString(),
  };
}

const newestFirst = (a: AuditEntry, b: AuditEntry) => b.at - a.at || b.seq - a.seq;

/** Seeded entries are dated 2026-11-01 from 09:00Z, an hour apart, before any write of a run. */
function seedEntries(merchants: SampleMerchants): AuditEntry[] {
  return Object.entries(merchants).flatMap(([acquirerId, ids]) =>
    ids.map((merchantId, i) => ({
      id: uuidFrom(`audit/${acquirerId}/${merchantId}`),
      acquirerId,
      actionType: 'create' as const,
      subjectType: 'merchant',
      subjectId: merchantId,
      at: Date.UTC(2026, 10, 1, 9 + i),
      seq: i,
    })),
  );
}

export function createSampleAuditLog(merchants: SampleMerchants): SampleAuditLog {
  const entries = seedEntries(merchants);
  let seq = entries.length;
  const list: SampleRoute = {
    pattern: /^\/v1\/audit_logs$/,
    methods: {
      GET: (req) => {
        const query = parseQuery(req.query);
        const items = integerParam(query, 'items', { min: 1, max: AUDIT_LOG_MAX_ITEMS, fallback: AUDIT_LOG_DEFAULT_ITEMS });
        const page = integerParam(query, 'page', { min: 1, fallback: 1 });
        const [from, to] = [instantParam(query, 'created_at[gte]'), instantParam(query, 'created_at[lte]')];
        const own = entries
          .filter((e) => e.acquirerId === req.acquirerId && (from === undefined || e.at >= from) && (to === undefined || e.at <= to))
          .filter((e) => EQUALITY_FILTERS.every(([name, field]) => !query.has(name) || field(e) === query.get(name)))
          .sort(newestFirst);
        const start = (page - 1) * items;
        return jsonReply(200, {
          audit_logs: own.slice(start, start + items).map(entryJson),
          meta: { current_page: page, next_page: own.length > start + items ? page + 1 : null, prev_page: page > 1 ? page - 1 : null },
        });
      },
    },
  };
  const retrieve: SampleRoute = {
    pattern: /^\/v1\/audit_logs\/([^/]+)$/,
    methods: {
      GET: (req) => {
        const entry = entries.find((e) => e.id === req.params[0]);
        if (entry === undefined) throw refuse(404, 'audit log entry not found');
        if (entry.acquirerId !== req.acquirerId) throw refuse(403, 'forbidden');
        return jsonReply(200, entryJson(entry));
      },
    },
  };
  return {
    record(acquirerId, action, at) {
      entries.push({ ...action, id: newId(), acquirerId, at: at.getTime(), seq: seq++ });
    },
    routes: [list, retrieve],
  };
}
