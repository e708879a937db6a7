/**
 * @module
 * The EOD statements of the sample upstream. Another acquirer's statement answers 403 (as some legacy
 * services do), which the shipped policy turns into the same 404 as a missing one. Its error bodies
 * keep the legacy `{"error": …}` shape the gateway replaces.
 */
import { jsonReply, type SampleRequest, type SampleRoute } from './sample-http.js';
import { uuidFrom } from './sample-ids.js';
import { parseQuery } from './sample-query.js';

export interface SampleStatement {
  readonly id: string;
  readonly acquirerId: string;
  readonly date: string; // YYYY-MM-DD
  readonly createdAt: string;
}

/** `perAcquirer` statements for each acquirer, one a day back from 2026-11-21, with ids stable across runs. */
export function sampleStatements(acquirerIds: readonly string[], perAcquirer = 3): SampleStatement[] {
  return acquirerIds.flatMap((acquirerId) =>
    Array.from({ length: perAcquirer }, (_, i) => {
      const date = `2026-11-${String(21 - i).padStart(2, '0')}`;
      return { id: uuidFrom(`${acquirerId}/${date}`), acquirerId, date, createdAt: `${date}T23:30:00Z` };
    }),
  );
}

/** Statements per page of the list, as the API's pagination metadata counts them. */
export const SAMPLE_PAGE_SIZE = 25;

function statementJson(s: SampleStatement) {
  return {
    id: s.id,
    csv_file: `/v1/acquirer/eod_statements/${s.id}.csv`,
    date: `${s.date}T00:00:00+00:00`,
    created_at: s.createdAt,
    updated_at: s.createdAt,
  };
}

function csvFor(s: SampleStatement): string {
  return `date,merchant_id,transactions,amount,currency\r\n${s.date},m_1001,42,1234.56,EUR\r\n${s.date},m_1002,7,99.90,EUR\r\n`;
}

/** One page of an acquirer's statements, newest first, with the API's `meta`; `page` counts from 1. */
function listPage(own: readonly SampleStatement[], page: number, perPage: number) {
  const totalPages = Math.max(1, Math.ceil(own.length / perPage));
  return {
    eod_statements: own.slice((page - 1) * perPage, page * perPage).map(statementJson),
    meta: { current_page: page, next_page: page < totalPages ? page + 1 : null, prev_page: page > 1 ? page - 1 : null, total_pages: totalPages, total_count: own.length },
  };
}

/** The list, the download by id and the download by date, each scoped by the caller's acquirer. */
export function statementRoutes(statements: readonly SampleStatement[], perPage: number): SampleRoute[] {
  const csv = (req: SampleRequest, statement: SampleStatement | undefined) => {
    if (!statement) return jsonReply(404, { error: 'not found', path: req.path });
    return { status: 200, text: csvFor(statement), headers: { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': `attachment; filename="${statement.id}.csv"` } };
  };
  return [
    {
      pattern: /^\/v1\/acquirer\/eod_statements$/,
      methods: {
        GET: (req) => {
          const own = statements.filter((s) => s.acquirerId === req.acquirerId).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
          // The gateway lets through only a page of 1 or more (the policy's positive_integer).
          const page = Number(parseQuery(req.query).get('page') ?? '1');
          if (!Number.isInteger(page) || page < 1) return jsonReply(400, { error: 'page must be a positive integer' });
          return jsonReply(200, listPage(own, page, perPage));
        },
      },
    },
    {
      pattern: /^\/v1\/acquirer\/eod_statements\/([0-9a-f-]{36})\.csv$/,
      methods: {
        GET: (req) => {
          const statement = statements.find((s) => s.id === req.params[0]);
          if (statement && statement.acquirerId !== req.acquirerId) return jsonReply(403, { error: 'forbidden', owner: statement.acquirerId });
          return csv(req, statement);
        },
      },
    },
    {
      pattern: /^\/v1\/acquirer\/eod_statements\/by_date\/(\d{4}-\d{2}-\d{2})\.csv$/,
      methods: { GET: (req) => csv(req, statements.find((s) => s.date === req.params[0] && s.acquirerId === req.acquirerId)) },
    },
  ];
}
