import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitFor } from './wait.js';

export const CLI = path.resolve('dist/cli.js');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built CLI (`npm run build` first; `npm test` does). */
export function runCli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `keys create` through the CLI; returns the printed record (with the secret). */
export async function createKey(
  env: Record<string, string>,
  options: { acquirer: string; permissions: string[]; allowIp?: string[]; description?: string },
): Promise<{ id: string; key: string; acquirer_id: string; permissions: string[]; allowed_ips: string[] }> {
  const args = ['keys', 'create', '--acquirer', options.acquirer, '--permissions', options.permissions.join(',')];
  if (options.allowIp) args.push('--allow-ip', options.allowIp.join(','));
  if (options.description !== undefined) args.push('--description', options.description);
  const result = await runCli(args, env);
  if (result.code !== 0) throw new Error(`keys create failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout);
}

/** A `serve` process. */
export interface ServeProcess {
  readonly port: number;
  readonly url: string;
  readonly adminUrl: string;
  readonly child: ChildProcess;
  readonly logLines: string[];
  /** What it wrote to stderr so far. */
  stderr(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `viaShebang`: run dist/cli.js itself, as the installed command and the image do, with its node flags.
 * `script`: a script run by node in its place, which runs the CLI in turn (test/fixtures/*.mjs).
 * `listeningEvent`: the log line waited for (with WORKERS, `worker_listening` is the first worker's,
 * which carries the port but no admin port).
 */
export async function startServe(env: Record<string, string>, { viaShebang = false, script = CLI, listeningEvent = 'listening' } = {}): Promise<ServeProcess> {
  const child = spawn(viaShebang ? CLI : process.execPath, viaShebang ? ['serve'] : [script, 'serve'], {
    env: { PATH: process.env.PATH, PORT: '0', HOST: '127.0.0.1', ADMIN_PORT: '0', LOG_LEVEL: 'info', ...env },
  });
  const logLines: string[] = [];
  let buffered = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    logLines.push(...lines);
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const { port, admin_port: adminPort } = await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`serve exited with ${child.exitCode}: ${stderr}`);
      for (const line of logLines) {
        const entry = JSON.parse(line) as { event?: string; port: number; admin_port: number };
        if (entry.event === listeningEvent) return entry;
      }
      return undefined;
    },
    { timeoutMs: 10_000, what: 'serve to listen' },
  );
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    child,
    logLines,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}
