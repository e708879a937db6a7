// The upstream for the benchmark, in its own process: plain node:http serving the JSON list.
import http from 'node:http';

const LIST_BODY = JSON.stringify({
  eod_statements: Array.from({ length: 10 }, (_, i) => ({ id: `00000000-0000-4000-8000-00000000000${i}`, csv_file: `/v1/acquirer/eod_statements/${i}.csv`, date: '2026-11-21T00:00:00+00:00', created_at: '2026-11-21T23:30:00Z', updated_at: '2026-11-21T23:30:00Z' })),
  meta: { current_page: 1, next_page: null, prev_page: null, total_pages: 1, total_count: 10 },
});
const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(LIST_BODY) });
  res.end(LIST_BODY);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
