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

/** The printed commands, as [url, authorization header or undefined]. */
function commands(): [string, string | undefined][] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('curl '))
    .map((line) => {
      const url = /(http:\/\/\S+)/.exec(line)![1]!;
      const auth = /-H 'Authorization: (Bearer \S+)'/.exec(line)?.[1];
      return [url, auth];
    });
}

it('prints six commands that answer 200, 200, 200, 200, 404, 401', async () => {
  const cmds = commands();
  expect(cmds).toHaveLength(6);
  const results = [];
  for (const [url, auth] of cmds) {
    const u = new URL(url);
    results.push(await request(u.origin, u.pathname, auth ? { authorization: auth } : {}));
  }
  expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 404, 401]);
  expect(JSON.parse(results[0]!.body.toString()).eod_statements).toHaveLength(3);
  expect(results[1]!.headers['content-type']).toBe('text/csv; charset=utf-8');
  expect(results[1]!.body.toString()).toMatch(/^date,merchant_id/);
  expect(results[2]!.body.toString()).toBe(results[1]!.body.toString());
  expect(JSON.parse(results[3]!.body.toString()).permissions).toHaveLength(21);
  expect(results[4]!.body.toString()).toBe('{"message":"Not found"}');
  expect(results[5]!.body.toString()).toBe('{"message":"Invalid authentication information"}');
});

it('listens on loopback only (HOST unset): it mints live keys', () => {
  const base = new URL(commands()[0]![0]);
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
  const [url, auth] = commands()[0]!;
  const u = new URL(url);
  const page = async (n: number) => JSON.parse((await request(u.origin, `${u.pathname}?page=${n}`, { authorization: auth! })).body.toString());
  expect((await page(1)).meta).toEqual({ current_page: 1, next_page: null, prev_page: null, total_pages: 1, total_count: 3 });
  const second = await page(2);
  expect(second.eod_statements).toEqual([]);
  expect(second.meta).toEqual({ current_page: 2, next_page: null, prev_page: 1, total_pages: 1, total_count: 3 });
});

it('follows edits to its policy file, as serve does, and says so at its own log level', async () => {
  const [url, auth] = commands()[3]!; // the catalogue
  const u = new URL(url);
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
