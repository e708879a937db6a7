import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { request } from '../helpers/http.js';
import { waitFor } from '../helpers/wait.js';

/** `npm start` as a newcomer meets it: no outside service, and every printed curl command answers as described. */
let child: ChildProcess;
let output = '';
/** A copy of the shipped policy, which one test edits. */
const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-quickstart-'));
const policyFile = path.join(dir, 'policy.yaml');

beforeAll(async () => {
  copyFileSync('policies/acquirer-api.yaml', policyFile);
  child = spawn(process.execPath, [path.resolve('dist/demo/quickstart.js')], {
    env: { PATH: process.env.PATH, PORT: '0', REDIS_URL: 'redis://127.0.0.1:1', POLICY_FILE: policyFile }, // proves Redis is not used
  });
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await waitFor(() => output.includes('# no key: 401') && output.trimEnd().endsWith('/v1/acquirer/eod_statements'), {
    timeoutMs: 10_000,
    what: 'the quickstart to print its commands',
  });
}, 20_000);

afterAll(async () => {
  if (child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The printed commands, as lines of shell. */
function printed(): string[] {
  return output.split('\n').filter((line) => line.startsWith('curl ') || line.startsWith('NEW_USER='));
}

/** A printed command's URL and Authorization header. */
function urlAndAuth(line: string): [URL, string | undefined] {
  return [new URL(/(http:\/\/[^\s']+)/.exec(line)![1]!), /-H 'Authorization: (Bearer \S+)'/.exec(line)?.[1]];
}

/** Runs the printed commands in one bash, one after the other, as a newcomer pastes them; what each printed. */
function runInBash(lines: string[]): Promise<string[]> {
  const separator = '@@@ next command @@@';
  const script = lines.map((line) => `{ ${line}\n} 2>&1; echo; echo '${separator}'`).join('\n');
  return new Promise((resolve, reject) => {
    const bash = spawn('bash', ['-c', script]);
    let out = '';
    bash.stdout.on('data', (d: Buffer) => (out += d.toString()));
    bash.on('error', reject);
    bash.on('close', () => resolve(out.split(`\n${separator}\n`).slice(0, lines.length)));
  });
}

/** Status and body of what `curl -si` printed. */
function answer(text: string): { status: number; body: string } {
  const [head, ...body] = text.split('\r\n\r\n');
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head!)?.[1]), body: body.join('\r\n\r\n').trim() };
}

it('prints commands that answer, pasted into bash, as their comments say', async () => {
  const lines = printed();
  expect(lines).toHaveLength(10);
  const results = await runInBash(lines);
  expect(JSON.parse(results[0]!).eod_statements).toHaveLength(3);
  expect(results[1]).toMatch(/^date,merchant_id/);
  expect(results[2]).toBe(results[1]);
  expect(JSON.parse(results[3]!).permissions).toHaveLength(21);
  expect(answer(results[4]!)).toEqual({ status: 404, body: '{"message":"Not found"}' });
  const [createdBody, createdStatus] = results[5]!.trim().split('\n');
  expect(createdStatus).toBe('HTTP 201');
  const created = JSON.parse(createdBody!);
  expect(created).toMatchObject({ merchant_id: 'acq_alpha_m1', name: 'Ada Lovelace', status: 'invited' });
  expect(answer(results[6]!)).toEqual({ status: 404, body: '{"message":"Not found"}' });
  expect(answer(results[7]!)).toEqual({ status: 400, body: '{"message":"Bad request"}' });
  expect(JSON.parse(results[8]!).audit_logs[0]).toMatchObject({ action_name: 'merchant_user.create', subject_id: created.id });
  expect(answer(results[9]!)).toEqual({ status: 401, body: '{"message":"Invalid authentication information"}' });
});

it('listens on loopback only (HOST unset): it mints live keys', () => {
  const [base] = urlAndAuth(printed()[0]!);
  expect(base.hostname).toBe('127.0.0.1');
  // The kernel's table of listening TCP sockets (state 0A), local address in hex: 0100007F is 127.0.0.1.
  const port = Number(base.port).toString(16).toUpperCase().padStart(4, '0');
  const listening = ['/proc/net/tcp', '/proc/net/tcp6']
    .flatMap((file) => readFileSync(file, 'utf8').split('\n').slice(1))
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1]?.endsWith(`:${port}`) && fields[3] === '0A')
    .map((fields) => fields[1]);
  expect(listening).toEqual([`0100007F:${port}`]);
});

it("pages the sample statements service's list, as the policy lets a client ask", async () => {
  const [u, auth] = urlAndAuth(printed()[0]!);
  const page = async (n: number) => JSON.parse((await request(u.origin, `${u.pathname}?page=${n}`, { authorization: auth! })).body.toString());
  expect((await page(1)).meta).toEqual({ current_page: 1, next_page: null, prev_page: null, total_pages: 1, total_count: 3 });
  const second = await page(2);
  expect(second.eod_statements).toEqual([]);
  expect(second.meta).toEqual({ current_page: 2, next_page: null, prev_page: 1, total_pages: 1, total_count: 3 });
});

it('follows edits to its policy file, as serve does, and says so at its own log level', async () => {
  const [u, auth] = urlAndAuth(printed()[3]!); // the catalogue
  const catalogue = async () => (await request(u.origin, u.pathname, { authorization: auth! })).status;
  expect(await catalogue()).toBe(200);
  writeFileSync(policyFile, readFileSync(policyFile, 'utf8').replace(/\n  - id: api_keys_permissions[\s\S]*$/, '\n'));
  await waitFor(async () => (await catalogue()) === 404, { what: 'the edit to apply' });
  const reloaded = await waitFor(() => output.split('\n').find((line) => line.includes('"event":"policy_reloaded"')), { what: 'the reload line' });
  // The quickstart logs at warn: the line is raised to it, as a refused reload's (error) shows.
  expect(JSON.parse(reloaded)).toMatchObject({ level: 40, event: 'policy_reloaded', trigger: 'file', routes: 3 });
});

it('takes SIGHUP as a reload, as serve does', async () => {
  const metrics = new URL(/metrics on (http:\/\/\S+\/metrics)/.exec(output)![1]!);
  const reloads = async () => {
    const text = (await request(metrics.origin, metrics.pathname)).body.toString();
    return [...text.matchAll(/^acquirer_gateway_policy_reloads_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
  };
  const before = await reloads();
  child.kill('SIGHUP');
  // Node's default action for SIGHUP would have ended the process: then no reload would ever be counted.
  await waitFor(async () => (await reloads()) > before, { timeoutMs: 3000, what: 'the SIGHUP reload to be counted' });
  expect(child.exitCode).toBeNull();
});

it('stops everything on Ctrl-C (SIGINT) with exit code 0', async () => {
  const exited = new Promise<[number | null, string | null]>((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
  child.kill('SIGINT');
  expect(await exited).toEqual([0, null]);
});
