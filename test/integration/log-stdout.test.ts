import { spawn } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * The logger's own stdout: lines encoded into 16 KiB blocks and written by sonic-boom. Run in a child
 * process whose stdout is a pipe, as a gateway's is under a supervisor, so what is checked is the
 * bytes that leave the process: every line whole, in order, across block boundaries, with characters
 * of every UTF-8 length, a line larger than a block, and what was still buffered at exit.
 */
const LOGGER = pathToFileURL(path.resolve('dist/logger.js')).href;

const CHILD = `
const { createLogger } = await import(${JSON.stringify(LOGGER)});
const logger = createLogger('info');
for (let i = 0; i < 3000; i++) {
  logger.flat('info', { i, note: i % 7 === 0 ? 'é€😀 ' + 'x'.repeat(i % 300) : 'plain ' + 'y'.repeat(i % 500) }, 'request');
  if (i === 1500) logger.warn({ big: 'z'.repeat(40000) + '€' }, 'a line larger than a block');
}
logger.info('last line, still buffered when the process exits');
process.stderr.write('logged everything\\n');
`;

/** `readLate`: stdout is not read until the child has logged everything, so its pipe is full at exit. */
function runChild(readLate: boolean): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    if (readLate) child.stdout.pause();
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes('logged everything')) child.stdout.resume();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr }));
  });
}

describe('log lines on stdout', () => {
  it.each([
    ['read as they come', false],
    ['read only once the process is exiting, through a full pipe', true],
  ])('arrive whole and in order, whatever their length and characters, including those buffered at exit (%s)', async (_, readLate) => {
    const { code, stdout, stderr } = await runChild(readLate);
    expect(stderr).toBe('logged everything\n');
    expect(code).toBe(0);
    expect(stdout.endsWith('\n')).toBe(true);
    const lines = stdout.slice(0, -1).split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toHaveLength(3002);
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests.map((l) => l.i)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    for (const l of requests) {
      const i = l.i as number;
      expect(l.note).toBe(i % 7 === 0 ? 'é€😀 ' + 'x'.repeat(i % 300) : 'plain ' + 'y'.repeat(i % 500));
    }
    const bigAt = lines.findIndex((l) => l.msg === 'a line larger than a block');
    expect(lines[bigAt]!.big).toBe('z'.repeat(40000) + '€');
    expect(lines[bigAt - 1]!.i).toBe(1500);
    expect(lines[bigAt + 1]!.i).toBe(1501);
    expect(lines.at(-1)!.msg).toBe('last line, still buffered when the process exits');
  });
});
