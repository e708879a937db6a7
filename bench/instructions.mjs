// Instructions per request, gateway against floor, counted by valgrind (cachegrind, no cache
// simulation): a count, not a time, so it repeats whatever else the machine is doing, where
// requests/s move by 10–30% between runs on this VM. Each target runs twice under valgrind, once for
// `few` and once for `many` sequential keep-alive requests of the JSON list; the difference over
// `many − few` requests is the cost of one request, with start-up and loading left out. Every thread is
// counted (V8's collector and compilers too); the kernel's side of system calls is not. V8's
// optimising choices follow the code and the warm-up, so two builds a few percent apart are not told
// apart (bench/README.md). Usage (after `npm run build`, valgrind on PATH):
//   node bench/instructions.mjs [few=1000] [many=4000] [rows=25]
// It prints the total, the split into the code each request runs, V8's collector and its compilers,
// then the code's functions, largest difference first.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { gatewayCli, get, startGateway, startRedis, startScript, stopAll } from './lib/services.mjs';

const [few = 1000, many = 4000, rows = 25] = process.argv.slice(2).map(Number);
if (!(Number.isInteger(few) && Number.isInteger(many) && Number.isInteger(rows) && few >= 0 && many > few && rows >= 0)) {
  console.error('usage: node bench/instructions.mjs [few=1000] [many=4000] [rows=25]: whole numbers, few < many');
  process.exit(2);
}
if (spawnSync('valgrind', ['--version']).error !== undefined) {
  console.error('bench/instructions.mjs needs valgrind on PATH (Debian: apt-get install valgrind)');
  process.exit(1);
}

const LIST = '/v1/acquirer/eod_statements';
const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-instructions-'));
// Cachegrind's files are read and thrown away, also when a run fails half-way.
process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
// Under valgrind a process starts in tens of seconds, not in one.
const READY_MS = 180_000;
const valgrind = (out) => ['valgrind', '--tool=cachegrind', '--cache-sim=no', `--cachegrind-out-file=${out}`, '--quiet'];

/** `count` GETs one after another on one keep-alive connection; every answer must be `expected`. */
async function sequential(url, headers, count, expected) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < count; i++) {
      const { status, body } = await new Promise((resolve, reject) => {
        http
          .get(url, { agent, headers }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (d) => (text += d));
            res.on('end', () => resolve({ status: res.statusCode, body: text }));
          })
          .on('error', reject);
      });
      if (status !== 200 || body !== expected) throw new Error(`${url}: request ${i + 1} answered ${status}, not the upstream's 200 and body`);
    }
  } finally {
    agent.destroy();
  }
}

/**
 * Instructions of one process's life (every thread) from a cachegrind file: the total, and by
 * function. Code V8 compiled at run time has no symbol: it is counted under `???`.
 */
function readCounts(out) {
  const text = readFileSync(out, 'utf8');
  const m = /^summary: (\d+)/m.exec(text);
  if (!m) throw new Error(`${out}: no summary line`);
  const byFunction = new Map();
  let fn = '???';
  for (const line of text.split('\n')) {
    if (line.startsWith('fn=')) fn = line.slice(3);
    else if (/^\d/.test(line)) byFunction.set(fn, (byFunction.get(fn) ?? 0) + Number(line.split(' ')[1]));
  }
  return { total: Number(m[1]), byFunction };
}

/** Starts a target under valgrind, sends `count` requests, stops it (SIGTERM) and returns its instructions. */
async function measure(name, start, count) {
  const out = path.join(dir, `${name}-${count}.out`);
  const target = await start(valgrind(out));
  await sequential(`${target.url}${LIST}`, headers, count, expected);
  await target.stop();
  const counts = readCounts(out);
  console.error(`instructions: ${name}, ${count} requests: ${counts.total.toLocaleString('en')}`);
  return counts;
}

const origin = await startScript('origin.mjs', String(1024 * 1024));
const redis = await startRedis();
const gwEnv = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'bench:', UPSTREAM_URL: origin.url };
const { key } = await gatewayCli(gwEnv, 'keys', 'create', '--acquirer', 'acq_bench', '--permissions', 'eod_list,eod_read');
const headers = { authorization: `Bearer ${key}` };
const expected = (await get(`${origin.url}${LIST}`)).body;

const stopped = (child) => () =>
  new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
const targets = {
  floor: async (wrapper) => {
    const s = await startScript({ wrapper }, 'floor.mjs', origin.url);
    return { url: s.url, stop: stopped(s.child) };
  },
  gateway: async (wrapper) => {
    const g = await startGateway(gwEnv, { wrapper, readyMs: READY_MS });
    return { url: g.url, stop: () => g.stop() };
  },
};

const perRequest = {};
for (const [name, start] of Object.entries(targets)) {
  // BENCH_INSTRUCTIONS_SKIP_FLOOR=1: the gateway alone, to compare two of its builds (the floor's count repeats).
  if (name === 'floor' && process.env.BENCH_INSTRUCTIONS_SKIP_FLOOR === '1') continue;
  const low = await measure(name, start, few);
  const high = await measure(name, start, many);
  const byFunction = new Map();
  for (const fn of new Set([...low.byFunction.keys(), ...high.byFunction.keys()])) {
    byFunction.set(fn, ((high.byFunction.get(fn) ?? 0) - (low.byFunction.get(fn) ?? 0)) / (many - few));
  }
  perRequest[name] = { total: (high.total - low.total) / (many - few), byFunction };
}
stopAll();

const { gateway } = perRequest;
const floor = perRequest.floor ?? { total: NaN, byFunction: new Map() };
const k = (n) => `${(n / 1000).toFixed(1)}k`;
// V8's collector and its compilers run when their own counters say so, not on every request: a
// window of a few thousand requests holds one full collection more or less than another (tens of
// millions of instructions). They are shown apart, so that the rest (the code each request runs)
// can be compared between builds to a few hundred instructions. Grouped by function name.
const COLLECTOR = /^(heap::base|cppgc)::|^v8::internal::(Heap\w*|\w*Scaveng\w*|\w*Mark\w*|\w*Sweep\w*|\w*Evacuat\w*|RememberedSet\w*|SlotSet|TypedSlot\w*|FreeList\w*|MemoryAllocator|\w*PageMetadata|MemoryChunk\w*|WriteBarrier|\w*Worklist\w*|GCTracer|LocalHeap|Safepoint\w*|\w*ObjectVisitor\w*|BodyDescriptorBase|HeapObject::SizeFromMap|ObjectStatsCollector|StringForwardingTable|OldGenerationMemoryChunkIterator|PagedSpace\w*|NewSpace|SemiSpace\w*|Space|LargeObjectSpace)(::|<|\b)|v8::internal::\(anonymous namespace\)::IterateObjectCache|Scavenger|ScavengeVisitor|Marking|Sweeper|Evacuat|MarkCompact|RecordMigratedSlot/;
const COMPILER = /^v8::internal::(compiler|maglev|baseline|interpreter|turboshaft)::|^v8::internal::(Compiler|\w*Parser\w*|Scanner|\w*CompilationJob\w*|OptimizingCompile\w*|AstValueFactory|DeclarationScope|Scope|Zone\w*)(::|<)/;
const group = (fn) => (COLLECTOR.test(fn) ? 'collector' : COMPILER.test(fn) ? 'compiler' : 'code');
const sums = (p) => {
  const out = { collector: 0, compiler: 0, code: 0 };
  for (const [fn, n] of p.byFunction) out[group(fn)] += n;
  return out;
};
const g = sums(gateway);
const f = sums(floor);
console.log(`Instructions per request (JSON list, 1 connection, ${many} − ${few} requests; valgrind ${spawnSync('valgrind', ['--version']).stdout.toString().trim()}, node ${process.version})\n`);
console.log('| gateway − floor | gateway | floor | where |\n|---|---|---|---|');
console.log(`| ${k(gateway.total - floor.total)} | ${k(gateway.total)} | ${k(floor.total)} | all (gateway / floor ${(gateway.total / floor.total).toFixed(2)}×) |`);
console.log(`| ${k(g.code - f.code)} | ${k(g.code)} | ${k(f.code)} | the code each request runs (gateway / floor ${(g.code / f.code).toFixed(2)}×) |`);
console.log(`| ${k(g.collector - f.collector)} | ${k(g.collector)} | ${k(f.collector)} | V8's collector (lumpy: see above) |`);
console.log(`| ${k(g.compiler - f.compiler)} | ${k(g.compiler)} | ${k(f.compiler)} | V8's compilers (lumpy) |`);
console.log(`\nThe code each request runs, by function, largest difference first (\`???\`: code V8 compiled at run time)\n`);
console.log('| gateway − floor | gateway | floor | function |\n|---|---|---|---|');
const names = [...new Set([...gateway.byFunction.keys(), ...floor.byFunction.keys()])].filter((fn) => group(fn) === 'code');
const diff = (fn) => (gateway.byFunction.get(fn) ?? 0) - (floor.byFunction.get(fn) ?? 0);
// Demangled names are long; the table keeps their first 100 characters.
const short = (fn) => (fn.length > 100 ? `${fn.slice(0, 99)}…` : fn).replaceAll('|', '\\|');
for (const fn of names.sort((a, b) => Math.abs(diff(b)) - Math.abs(diff(a))).slice(0, rows)) {
  console.log(`| ${k(diff(fn))} | ${k(gateway.byFunction.get(fn) ?? 0)} | ${k(floor.byFunction.get(fn) ?? 0)} | \`${short(fn)}\` |`);
}
