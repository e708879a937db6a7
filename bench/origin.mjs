// The upstream for the benchmark, in its own process: plain node:http serving the JSON list, a CSV
// statement of a chosen size (argv[2], bytes), and a 201 to any POST. The CSV is deterministic, so every proxy's copy can be
// compared with the upstream's by hash, and each 1 MiB block is numbered, so a lost, repeated or
// reordered block changes the hash.
import http from 'node:http';

const CSV_BYTES = Number(process.argv[2] ?? 1024 ** 3);
const LIST_BODY = JSON.stringify({
  eod_statements: Array.from({ length: 10 }, (_, i) => ({ id: `00000000-0000-4000-8000-00000000000${i}`, csv_file: `/v1/acquirer/eod_statements/00000000-0000-4000-8000-00000000000${i}.csv`, date: '2026-11-21T00:00:00+00:00', created_at: '2026-11-21T23:30:00Z', updated_at: '2026-11-21T23:30:00Z' })),
  meta: { current_page: 1, next_page: null, prev_page: null, total_pages: 1, total_count: 10 },
});

const BLOCK = 1024 * 1024;
const ROW = 'txn_0000000000,2026-11-21T12:00:00Z,merchant_000042,EUR,000000012345,captured\n';
const filler = Buffer.from(ROW.repeat(Math.ceil(BLOCK / ROW.length))).subarray(0, BLOCK - 32);
/** Block n: a 32-byte numbered row, then the shared filler. */
const blockHead = (n) => Buffer.from(`block,${String(n).padStart(25, '0')}\n`);

function streamCsv(res) {
  res.writeHead(200, { 'content-type': 'text/csv', 'content-length': CSV_BYTES });
  let sent = 0;
  let n = 0;
  const pump = () => {
    while (sent < CSV_BYTES) {
      const block = Buffer.concat([blockHead(n++), filler]).subarray(0, Math.min(BLOCK, CSV_BYTES - sent));
      sent += block.length;
      if (!res.write(block)) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}

/** A write: the body read to its end, then a small 201, as a create answers. */
function created(req, res) {
  let bytes = 0;
  req.on('data', (chunk) => (bytes += chunk.length));
  req.on('end', () => {
    const body = JSON.stringify({ id: '00000000-0000-4000-8000-0000000000aa', received_bytes: bytes });
    res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}

const server = http.createServer((req, res) => {
  if (req.method === 'POST') return created(req, res);
  if (req.url.endsWith('.csv')) return streamCsv(res);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(LIST_BODY) });
  res.end(LIST_BODY);
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
