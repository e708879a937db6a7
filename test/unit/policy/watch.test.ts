import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Counter } from 'prom-client';
import { loadPolicyOrThrow, type LoadedPolicy } from '../../../src/policy/load.js';
import { PolicyFile } from '../../../src/policy/watch.js';
import { createLogger } from '../../../src/observability/logger/logger.js';
import { tempDir } from '../../helpers/temp-dir.js';

const shipped = fs.readFileSync('policies/acquirer-api.yaml', 'utf8');

/** A PolicyFile over a copy of the shipped policy, with what it logs, counts and accepts. */
async function policyFile({ pipeWaitMs = 50 } = {}) {
  const file = path.join(tempDir('policy-file-'), 'policy.yaml');
  fs.writeFileSync(file, shipped);
  const initial = await loadPolicyOrThrow(file);
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  const reloads = new Counter({ name: 'reloads', help: 'reloads', labelNames: ['result'], registers: [] });
  const accepted: LoadedPolicy[] = [];
  const subject = new PolicyFile(file, initial, { logger, reloads, onAccepted: (next) => accepted.push(next), pipeWaitMs });
  const counted = async () => Object.fromEntries((await reloads.get()).values.map((v) => [v.labels.result, v.value]));
  return { file, initial, subject, lines, accepted, counted };
}

describe('a reload that finds a named pipe where the policy file was', () => {
  it('nobody writes it: the reload is refused once the wait is over, the running policy stays, and the next reload is not held', async () => {
    const p = await policyFile();
    fs.rmSync(p.file);
    execFileSync('mkfifo', [p.file]);
    const reason = `${p.file}:0:0: cannot read policy: a named pipe that nothing wrote to its end within 0.05 s`;

    expect(await p.subject.reload('signal')).toBe('failure');
    expect(await p.subject.reload('signal')).toBe('failure');
    expect(p.subject.accepted).toBe(p.initial);
    expect(p.accepted).toEqual([]);
    expect(await p.counted()).toEqual({ failure: 2 });
    const refusals = p.lines.filter((l) => l.event === 'policy_reload_refused');
    expect(refusals).toHaveLength(2);
    expect(refusals[0]).toMatchObject({ file: p.file, trigger: 'signal', errors: [reason], running: p.initial.policy.contentHash });

    // And once a file is back, it is read.
    fs.rmSync(p.file);
    fs.writeFileSync(p.file, `${shipped}# edited\n`);
    expect(await p.subject.reload('signal')).toBe('success');
    expect(p.accepted.map((a) => a.source)).toEqual([`${shipped}# edited\n`]);
  });

  it('watched: only a SIGHUP reads it (a read to compare would wait on it, and take what a writer meant for the reload)', async () => {
    const p = await policyFile({ pipeWaitMs: 60_000 });
    fs.rmSync(p.file);
    execFileSync('mkfifo', [p.file]);
    try {
      await p.subject.watch();
      // A writer that does not wait for a reader finds none: nothing holds the pipe open to read it.
      const writerWithoutWaiting = () => {
        try {
          fs.closeSync(fs.openSync(p.file, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
          return 'a reader was there';
        } catch (err) {
          return (err as NodeJS.ErrnoException).code;
        }
      };
      expect(writerWithoutWaiting()).toBe('ENXIO');
      const reloading = p.subject.reload('signal');
      const writer = await fs.promises.open(p.file, 'w');
      await writer.write(`${shipped}# from a pipe\n`);
      await writer.close();
      expect(await reloading).toBe('success');
      expect(p.accepted.map((a) => a.source)).toEqual([`${shipped}# from a pipe\n`]);
    } finally {
      p.subject.close();
    }
  });

  it('written to within the wait: read to the writer\'s end and accepted', async () => {
    const p = await policyFile({ pipeWaitMs: 60_000 });
    fs.rmSync(p.file);
    execFileSync('mkfifo', [p.file]);
    const reloading = p.subject.reload('signal');
    const writer = await fs.promises.open(p.file, 'w'); // returns once the reload has the pipe open
    await writer.write(`${shipped}# from a pipe\n`);
    await writer.close();
    expect(await reloading).toBe('success');
    expect(p.subject.accepted.source).toBe(`${shipped}# from a pipe\n`);
    expect(await p.counted()).toEqual({ success: 1 });
  });
});
