import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { waitFor } from '../helpers/wait.js';

/**
 * The logger's own stdout: lines encoded into 16 KiB blocks and written by a LogWriter. Run in a child
 * process whose stdout is a pipe, as a gateway's is under a supervisor, so what is checked is the
 * bytes that leave the process: every line whole, in order, across block boundaries, with characters
 * of every UTF-8 length, a line larger than a block, and what was still buffered at exit.
 */
const LOGGER = pathToFileURL(path.resolve('dist/logger.js')).href;

type Exit = 'natural' | 'exitOnceLogged' | 'process.exit';

/** Logs 3,002 lines, says so on stderr, then ends as `exit` says. */
const child = (exit: Exit) => `
const { createLogger, exitOnceLogged } = await import(${JSON.stringify(LOGGER)});
const logger = createLogger('info');
for (let i = 0; i < 3000; i++) {
  logger.flat('info', { i, note: i % 7 === 0 ? 'é€😀 ' + 'x'.repeat(i % 300) : 'plain ' + 'y'.repeat(i % 500) }, 'request');
  if (i === 1500) logger.warn({ big: 'z'.repeat(40000) + '€' }, 'a line larger than a block');
}
const end = () => {
  logger.info('last line, still buffered when the process exits');
  process.stderr.write('logged everything\\n');
  ${exit === 'exitOnceLogged' ? 'exitOnceLogged(logger, 0);' : exit === 'process.exit' ? 'process.exit(0);' : ''}
};
// For process.exit(): a pause first, so that the blocks handed over fill the pipe (nobody reads it yet)
// and one is still being written, waiting for room, when the process exits.
${exit === 'process.exit' ? 'setTimeout(end, 250);' : 'end();'}
`;

/**
 * `reader`: how the parent reads the child's stdout. `late`: not until the child has logged
 * everything, so its pipe is full at exit; `slow`: the same, then 1 KiB at a time, so that writes
 * waiting for room in the pipe go on in small steps (where two writers' bytes would interleave);
 * `gone`: never, and the pipe is closed once the child has logged everything.
 */
async function runChild(exit: Exit, reader: 'as they come' | 'late' | 'slow' | 'gone'): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // A named pipe read by hand for `slow`: Node's own pipe stream would read it in 64 KiB gulps.
  const fifo = reader === 'slow' ? path.join(await mkdtemp(path.join(tmpdir(), 'log-stdout-')), 'stdout') : undefined;
  let readFd: number | undefined;
  let writeFd: number | undefined;
  if (fifo !== undefined) {
    execFileSync('mkfifo', [fifo]);
    readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    writeFd = openSync(fifo, constants.O_WRONLY);
  }
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--input-type=module', '-e', child(exit)], { stdio: ['ignore', writeFd ?? 'pipe', 'pipe'] });
    if (writeFd !== undefined) closeSync(writeFd);
    const out: Buffer[] = [];
    let stdoutDone: Promise<void> = Promise.resolve();
    let stderr = '';
    proc.stdout?.on('data', (d: Buffer) => out.push(d));
    if (reader === 'late' || reader === 'gone') proc.stdout!.pause();
    proc.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (!stderr.includes('logged everything')) return;
      if (reader === 'late') proc.stdout!.resume();
      else if (reader === 'gone') proc.stdout!.destroy();
      else if (reader === 'slow' && readFd !== undefined) {
        stdoutDone = readSlowly(readFd, out);
        readFd = undefined;
      }
    });
    proc.on('error', reject);
    proc.on('close', (code) => {
      void stdoutDone.then(() => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr }), reject);
    });
  });
}

/** Reads 1 KiB at a time, yielding between reads, until every writer has closed the pipe. */
async function readSlowly(fd: number, out: Buffer[]): Promise<void> {
  const chunk = Buffer.alloc(1024);
  try {
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      if (n === 0) return;
      out.push(Buffer.from(chunk.subarray(0, n)));
      await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    closeSync(fd);
  }
}

const note = (i: number) => (i % 7 === 0 ? 'é€😀 ' + 'x'.repeat(i % 300) : 'plain ' + 'y'.repeat(i % 500));

describe('log lines on stdout', () => {
  it.each([
    ['read as they come, natural exit', 'natural', 'as they come'],
    ['read only once the process is exiting, through a full pipe, natural exit', 'natural', 'late'],
    ['read only once the process is exiting, through a full pipe, exit after exitOnceLogged', 'exitOnceLogged', 'late'],
  ] as const)('arrive whole and in order, whatever their length and characters, including those buffered at exit (%s)', async (_, exit, reader) => {
    const { code, stdout, stderr } = await runChild(exit, reader);
    expect(stderr).toBe('logged everything\n');
    expect(code).toBe(0);
    expect(stdout.endsWith('\n')).toBe(true);
    const lines = stdout.slice(0, -1).split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toHaveLength(3002);
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests.map((l) => l.i)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    for (const l of requests) expect(l.note).toBe(note(l.i as number));
    const bigAt = lines.findIndex((l) => l.msg === 'a line larger than a block');
    expect(lines[bigAt]!.big).toBe('z'.repeat(40000) + '€');
    expect(lines[bigAt - 1]!.i).toBe(1500);
    expect(lines[bigAt + 1]!.i).toBe(1501);
    expect(lines.at(-1)!.msg).toBe('last line, still buffered when the process exits');
  });

  it('an immediate process.exit() while a write is under way loses the lines after it, but never cuts or mixes one', async () => {
    const { code, stdout, stderr } = await runChild('process.exit', 'slow');
    expect(stderr).toBe('logged everything\n');
    expect(code).toBe(0);
    expect(stdout.endsWith('\n')).toBe(true);
    const lines = stdout.slice(0, -1).split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const requests = lines.filter((l) => l.msg === 'request');
    // A prefix of what was logged, whole and in order (the pipe was full: some lines were still queued).
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.map((l) => l.i)).toEqual(Array.from({ length: requests.length }, (_, i) => i));
    for (const l of requests) expect(l.note).toBe(note(l.i as number));
  });

  it.each(['exitOnceLogged', 'process.exit'] as const)('a reader that went away does not hold the exit up (%s)', async (exit) => {
    let exited: { code: number | null } | undefined;
    void runChild(exit, 'gone').then((result) => (exited = result));
    const { code } = await waitFor(() => exited, { timeoutMs: 10_000, what: 'the child to exit once its stdout was closed' });
    expect(code).toBe(0);
  }, 15_000);
});
