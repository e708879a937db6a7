-- A request other than a GET, when the benchmark asks for one: its method and the file of its body.
local method = os.getenv("BENCH_WRK_METHOD")
if method then wrk.method = method end
local body_file = os.getenv("BENCH_WRK_BODY_FILE")
if body_file then
  local f = assert(io.open(body_file, "rb"))
  wrk.body = f:read("*a")
  f:close()
end

-- wrk's summary as one JSON line, read by bench/lib/load.mjs. Latencies are in microseconds.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
