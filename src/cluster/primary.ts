/**
 * @module
 * WORKERS above 1: the primary process. It serves no requests: it forks the workers (supervisor.ts),
 * answers the admin endpoints for all of them (metrics summed, readiness only if every worker is
 * ready), reads the policy file (and the shadow policy file) and gives each worker what it accepted,
 * and passes signals on.
 */
import type { Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { createAdminServer, type AdminServer, type MetricsSource, type ReadinessCheck } from '../admin/admin-server.js';
import type { Config } from '../config/env.js';
import { freePort, listen } from '../http/listen.js';
import { handleRunningSignals, type StartUpSignals } from '../lifecycle/signals.js';
import type { Logger } from '../observability/logger/logger.js';
import { createPrimaryMetrics, type PrimaryMetrics } from '../observability/metrics/metrics.js';
import { WorkerSums } from '../observability/metrics/worker-sums.js';
import type { LoadedPolicy } from '../policy/load.js';
import { PolicyFile, type PolicyFileOptions } from '../policy/watch.js';
import { WorkerQuestions } from './questions.js';
import { WorkerStartError, WorkerSupervisor } from './supervisor.js';

export { WorkerStartError };

/**
 * Binds the admin listener, forks `config.workers` workers and waits until each listens. `policy` is
 * the policy file's, as read and accepted at start-up, and `shadow` POLICY_SHADOW_FILE's, if set.
 * Resolves once running; the process then ends on SIGTERM/SIGINT after every worker has drained.
 * Rejects with WorkerStartError when a worker cannot start (its own error is on stderr).
 */
export async function runPrimary(config: Config, logger: Logger, startUp: StartUpSignals, policy: LoadedPolicy, shadow?: LoadedPolicy): Promise<void> {
  const questions = new WorkerQuestions();
  const sums = new WorkerSums<Worker>((err, worker) => logger.event('worker_sums_lost', { err, worker_pid: worker.process.pid }));
  const primaryMetrics = createPrimaryMetrics();
  let supervisor: WorkerSupervisor | undefined;
  const files = followPolicyFiles(config, logger, { policy, shadow, reloads: primaryMetrics.policyReloads, supervisor: () => supervisor });
  const listening = () => supervisor?.listening() ?? [];
  const admin = createAdminServer({
    metrics: summedMetrics(questions, listening, sums, primaryMetrics),
    readiness: () => clusterReadiness(questions, listening(), files.policy.accepted.policy.contentHash, supervisor),
    token: config.adminToken,
  });
  // The admin port first: if it is taken, nothing has been forked yet.
  const adminPort = await listen(admin, config.adminPort, config.adminHost);
  const port = await publicPort(config, admin);
  let stopped: Promise<void> | undefined;
  const stop = (reason: string, exitCode: number): Promise<void> => (stopped ??= stopAll(reason, exitCode, { logger, files: files.all, supervisor: supervisor!, admin }));
  supervisor = new WorkerSupervisor({
    config,
    logger,
    questions,
    port,
    policy: () => files.policy.accepted,
    shadow: () => files.shadow?.accepted,
    onGone: (w) => sums.retire(w),
    onNoneServing: () => void stop('worker could not start', 1),
  });
  supervisor.watch();
  handleSignals(config, logger, startUp, { files: files.all, supervisor, stop });
  try {
    await supervisor.startAll();
  } catch (err) {
    // A signal during start-up: the workers it stopped are not a failure to report.
    if (stopped !== undefined) return void (await stopped);
    supervisor.killAll();
    files.all.forEach((file) => file.close());
    admin.close();
    throw err;
  }
  // Stopping already (a signal while the workers started): they listen only to drain.
  if (stopped !== undefined) return void (await stopped);
  logger.event('listening', { port, host: config.host, admin_port: adminPort, admin_host: config.adminHost, workers: supervisor.pids() });
}

interface FollowedFiles {
  readonly policy: PolicyFile;
  readonly shadow: PolicyFile | undefined;
  readonly all: readonly PolicyFile[];
}

/**
 * The policy file and POLICY_SHADOW_FILE, read here for every worker: a worker still starting is
 * given what was accepted when it says it is ready, if what it asked for is older. Only the enforced
 * policy's reloads are counted in policy_reloads_total.
 */
function followPolicyFiles(
  config: Config,
  logger: Logger,
  { policy, shadow, reloads, supervisor }: { policy: LoadedPolicy; shadow: LoadedPolicy | undefined; reloads: PolicyFileOptions['reloads']; supervisor: () => WorkerSupervisor | undefined },
): FollowedFiles {
  const policyFile = new PolicyFile(config.policyFile, policy, { logger, reloads, onAccepted: (next) => supervisor()?.policyAccepted(next) });
  const shadowFile = shadow === undefined ? undefined : new PolicyFile(config.policyShadowFile, shadow, { logger, holds: 'shadow', onAccepted: (next) => supervisor()?.shadowAccepted(next) });
  return { policy: policyFile, shadow: shadowFile, all: shadowFile === undefined ? [policyFile] : [policyFile, shadowFile] };
}

/** `/metrics`: every listening worker asked for its own, summed with what the primary counts itself. */
function summedMetrics(questions: WorkerQuestions, listening: () => Worker[], sums: WorkerSums<Worker>, primaryMetrics: PrimaryMetrics): MetricsSource {
  return {
    contentType: AggregatorRegistry.PROMETHEUS_CONTENT_TYPE,
    text: async () => {
      const fresh = new Set<Worker>();
      for (const { worker, answer } of await questions.ask(listening(), 'metrics')) if (answer !== null && sums.answered(worker, answer.metrics!, answer.id)) fresh.add(worker);
      return (await sums.scrape(fresh, [await primaryMetrics.collect()])).metrics();
    },
  };
}

/**
 * SIGTERM/SIGINT drain every worker, a second one kills them, SIGHUP reloads the files; and they are
 * watched when POLICY_WATCH says so.
 */
function handleSignals(
  config: Config,
  logger: Logger,
  startUp: StartUpSignals,
  { files, supervisor, stop }: { files: readonly PolicyFile[]; supervisor: WorkerSupervisor; stop: (reason: string, exitCode: number) => Promise<void> },
): void {
  const reload = () => files.forEach((file) => void file.reload('signal'));
  const addSignalHandlers = () => handleRunningSignals(logger, { stop: (signal) => void stop(signal, 0), stopNow: () => supervisor.killAll(), reload });
  // The files were read before this, and may have changed since the SIGHUP that says so.
  if (startUp.handOver(addSignalHandlers).reloadAsked) reload();
  if (config.policyWatch) files.forEach((file) => void file.watch());
}

/**
 * After the admin listener, which may have asked for port 0 too and now holds what it got.
 * PORT=0: one free port, chosen here, for every worker. Each asking for port 0 instead, they would
 * share a port only while one of them lives: replacements forked after all died would listen on
 * another, where no client looks.
 */
async function publicPort(config: Config, admin: AdminServer): Promise<number> {
  if (config.port !== 0) return config.port;
  return freePort(config.host).catch((err: NodeJS.ErrnoException) => {
    // Where the primary cannot listen, no worker could.
    admin.close();
    throw new WorkerStartError(`HOST: cannot listen on ${config.host} (${err.code ?? err.message})`);
  });
}

/**
 * Ready only if every worker is there, staying and ready, and runs the policy accepted last (as of
 * the question: a worker takes messages in order, so its answer reflects every policy accepted
 * before it was asked, and none accepted while its answer was on the way back).
 */
async function clusterReadiness(questions: WorkerQuestions, workers: Worker[], accepted: string, supervisor: WorkerSupervisor | undefined): Promise<ReadinessCheck> {
  const answers = (await questions.ask(workers, 'readiness')).flatMap(({ answer }) => (answer === null ? [] : [answer]));
  const all = answers.map((answer) => answer.readiness!);
  return {
    policy: all.every((c) => c.policy === 'ok') && answers.every((answer) => answer.policy === accepted) ? 'ok' : 'not_loaded',
    key_store: worst(all.map((c) => c.key_store)),
    shutdown: supervisor?.stopping === true ? 'in_progress' : 'no',
    // Whether every worker is there and staying; why one is not ready is in the checks above.
    workers: all.length === supervisor?.counts.wanted && all.every((c) => c.shutdown === 'no') ? 'ok' : 'missing',
  };
}

/** Every worker drains, then the primary exits: 1 if a worker failed to, else `exitCode`. */
async function stopAll(reason: string, exitCode: number, { logger, files, supervisor, admin }: { logger: Logger; files: readonly PolicyFile[]; supervisor: WorkerSupervisor; admin: AdminServer }): Promise<void> {
  files.forEach((file) => file.close());
  logger.event('workers_shutting_down', { reason, workers: supervisor.counts.live });
  await supervisor.drainAll();
  admin.closeAllConnections();
  await new Promise((resolve) => admin.close(resolve));
  logger.event('stopped', { failed_workers: supervisor.failedExits });
  process.exit(supervisor.failedExits > 0 ? 1 : exitCode);
}

/** The key store as the least ready worker sees it. */
function worst(states: ReadinessCheck['key_store'][]): ReadinessCheck['key_store'] {
  if (states.includes('unavailable')) return 'unavailable';
  return states.includes('no_change_notices') ? 'no_change_notices' : 'ok';
}
