import { runCli, startServe, type ServeProcess } from './cli.js';
import { request } from './http.js';
import { waitFor } from './wait.js';

/**
 * What the Sentinel and Cluster failover tests share: gateways under load with every key while Redis
 * fails over, and a disable afterwards that every gateway must refuse within a second.
 */
const LIST = '/v1/acquirer/eod_statements';

/** What `keys disable` says when the primary it wrote to has no replica (the promoted one, after a kill). */
export const NO_REPLICA =
  /^acquirer-gateway: the change is written on the primary, which has no replica now: if it fails before one catches up, the change may be lost with it\. Run the command again after a failover\.\n$/;

/** `count` gateways on `env`, started one after another, each ready (its key store connected) before this resolves. */
export async function startReadyGateways(count: number, env: Record<string, string>): Promise<ServeProcess[]> {
  const gateways: ServeProcess[] = [];
  for (let i = 0; i < count; i++) gateways.push(await startServe(env));
  for (const g of gateways) await waitFor(async () => (await request(g.adminUrl, '/readyz')).status === 200, { what: 'the gateway ready' });
  return gateways;
}

export const statusOf = async (g: ServeProcess, key: string) => (await request(g.url, LIST, { authorization: `Bearer ${key}` })).status;
export const keyStoreState = async (g: ServeProcess) => JSON.parse((await request(g.adminUrl, '/readyz')).body.toString()).checks.key_store as string;

/**
 * Load on every gateway with a valid and a disabled key while `change` runs, then until each is back
 * (readiness ok, the valid key 200: recovery with no restart). What the load saw; a gateway that does
 * not come back fails with what it said and its last key store problems.
 */
export async function underLoad(gateways: readonly ServeProcess[], keys: { valid: string; disabled: string }, change: () => Promise<void>) {
  const seen = { disabledAllowed: 0, validStatuses: new Set<number>(), readiness: new Set<string>() };
  let loading = true;
  const load = Promise.all(
    gateways.map(async (g) => {
      while (loading) {
        if ((await statusOf(g, keys.disabled)) === 200) seen.disabledAllowed++;
        seen.validStatuses.add(await statusOf(g, keys.valid));
        seen.readiness.add(await keyStoreState(g));
      }
    }),
  );
  try {
    await change();
    // Slower when the whole suite loads the machine.
    for (const g of gateways) {
      await waitFor(async () => (await keyStoreState(g)) === 'ok' && (await statusOf(g, keys.valid)) === 200, { timeoutMs: 40_000, what: 'the gateway back on the new primary' }).catch(async (err: Error) => {
        const problems = g.logLines.filter((line) => line.includes('key_store_problem')).slice(-8).join('\n');
        throw new Error(`${err.message}; /readyz key_store ${await keyStoreState(g)}, a valid key ${await statusOf(g, keys.valid)}; last problems:\n${problems}`);
      });
    }
  } finally {
    loading = false;
    await load;
  }
  return seen;
}

/** The key, answered 200 by every gateway, is disabled; `keys disable` says `stderr`; every gateway refuses it within 1 s. */
export async function disabledWithinASecond(gateways: readonly ServeProcess[], env: Record<string, string>, key: { id: string; key: string }, stderr: string | RegExp = ''): Promise<void> {
  for (const g of gateways) expect(await statusOf(g, key.key)).toBe(200);
  const disable = await runCli(['keys', 'disable', key.id], env);
  expect(disable.code).toBe(0);
  if (typeof stderr === 'string') expect(disable.stderr).toBe(stderr);
  else expect(disable.stderr).toMatch(stderr);
  const returnedAt = Date.now();
  for (const g of gateways) await waitFor(async () => (await statusOf(g, key.key)) === 401, { timeoutMs: 1_000, what: 'the disable refused within 1 s' });
  expect(Date.now() - returnedAt).toBeLessThan(1_000);
}
