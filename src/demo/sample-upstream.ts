import { createHash } from 'node:crypto';
import http from 'node:http';

/**
 * A small stand-in for the statements service: the EOD endpoints, scoped by the acquirer header the
 * gateway injects, like the legacy backend. Another acquirer's statement answers 403 (as some legacy
 * services do), which the shipped policy turns into the same 404 as a missing one.
 */
export interface SampleStatement {
  readonly id: string;
  readonly acquirerId: string;
  readonly date: string; // YYYY-MM-DD
  readonly createdAt: string;
}

function uuidFrom(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

export function sampleStatements(acquirerIds: readonly string[], perAcquirer = 3): SampleStatement[] {
  return acquirerIds.flatMap((acquirerId) =>
    Array.from({ length: perAcquirer }, (_, i) => {
      const date = `2026-11-${String(21 - i).padStart(2, '0')}`;
      return { id: uuidFrom(`${acquirerId}/${date}`), acquirerId, date, createdAt: `${date}T23:30:00Z` };
    }),
  );
}

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

/** Statements per page of the list, as the API's pagination metadata counts them. */
export const SAMPLE_PAGE_SIZE = 25;

/** One page of an acquirer's statements, newest first, with the API's `meta`; `page` counts from 1. */
function listPage(own: readonly SampleStatement[], page: number, perPage: number) {
  const totalPages = Math.max(1, Math.ceil(own.length / perPage));
  return {
    eod_statements: own.slice((page - 1) * perPage, page * perPage).map(statementJson),
    meta: { current_page: page, next_page: page < totalPages ? page + 1 : null, prev_page: page > 1 ? page - 1 : null, total_pages: totalPages, total_count: own.length },
  };
}

export function createSampleUpstream(statements: readonly SampleStatement[], { acquirerHeader = 'x-acquirer-id', perPage = SAMPLE_PAGE_SIZE } = {}): http.Server {
  return http.createServer((req, res) => {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const acquirerId = req.headers[acquirerHeader.toLowerCase()];
    if (typeof acquirerId !== 'string') return json(401, { error: 'no acquirer' });
    const target = req.url ?? '';
    const at = target.indexOf('?');
    const [path, query] = at === -1 ? [target, ''] : [target.slice(0, at), target.slice(at + 1)];
    if (req.method !== 'GET') return json(405, { error: 'method not allowed' });
    if (path === '/v1/acquirer/eod_statements') {
      const own = statements.filter((s) => s.acquirerId === acquirerId).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
      // The gateway lets through only a page of 1 or more (the policy's positive_integer).
      const page = Number(new URLSearchParams(query).get('page') ?? '1');
      if (!Number.isInteger(page) || page < 1) return json(400, { error: 'page must be a positive integer' });
      return json(200, listPage(own, page, perPage));
    }
    const byId = /^\/v1\/acquirer\/eod_statements\/([0-9a-f-]{36})\.csv$/.exec(path);
    const byDate = /^\/v1\/acquirer\/eod_statements\/by_date\/(\d{4}-\d{2}-\d{2})\.csv$/.exec(path);
    let statement: SampleStatement | undefined;
    if (byId) {
      statement = statements.find((s) => s.id === byId[1]);
      if (statement && statement.acquirerId !== acquirerId) return json(403, { error: 'forbidden', owner: statement.acquirerId });
    } else if (byDate) {
      statement = statements.find((s) => s.date === byDate[1] && s.acquirerId === acquirerId);
    }
    if (!statement) return json(404, { error: 'not found', path });
    res.writeHead(200, { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': `attachment; filename="${statement.id}.csv"` });
    res.end(csvFor(statement));
  });
}
