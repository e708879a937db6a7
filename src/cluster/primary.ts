import cluster, { type Worker } from 'node:cluster';
import net, { type AddressInfo } from 'node:net';
import { AggregatorRegistry } from 'prom-client';
import { createAdminServer, type ReadinessCheck } from '../admin/admin-server.js';
import type { Config } from '../config/env.js';
import { parsePolicy, PolicyLoadError, type LoadedPolicy } from '../policy/load.js';
import { PolicyFile } from '../policy/watch.js';
import type { Logger } from '../observability/logger/logger.js';
import { createPrimaryMetrics } from '../observability/metrics/metrics.js';
import { WorkerSums, type WorkerMetrics } from '../observability/metrics/worker-sums.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { RestartPacer } from './restart-pacer.js';
import { UnansweredQuestions } from './heartbeat.js';
import type { RunningGateway } from '../gateway.js';
import { handleRunningSignals, type StartUpSignals } from '../lifecycle/signals.js';

/**
 * WORKERS above 1: one primary process and that many workers (node:cluster), all serving the one
 * public port. The primary serves no requests; it forks the workers, answers the admin endpoints for
 * all of them (metrics summed, readiness only if every worker is ready), passes signals on, and
 * replaces a worker that dies. It alone reads the policy file, and gives each worker the policy it
 * accepted: a worker asks for it as it starts, and is sent each one accepted later (./config/policy-file.ts).
 * Messages between them carry a tag, so nothing else's are mistaken.
 */
type Message =
  | { readonly tag: typeof TAG; readonly type: 'ready'; readonly port: number; readonly policy: string }
  | { readonly tag: typeof TAG; readonly type: 'shutdown' | 'get-policy' }
  | {
      readonly tag: typeof TAG;
      readonly type: 'policy';
      readonly file: string;
      readonly source: string;
      /** The public port, the same for every worker (with PORT=0, the one the primary chose). */
      readonly port: number;
    }
  | { readonly tag: typeof TAG; readonly type: 'readiness' | 'metrics'; readonly id: number }
  | {
      readonly tag: typeof TAG;
      readonly type: 'answer';
      readonly id: number;
      /** With `readiness`: the hash of the policy the worker runs. */
      readonly policy?: string;
      readonly readiness?: ReadinessCheck;
      readonly metrics?: WorkerMetrics;
    };

const TAG = 'acquirer-gateway';
const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;

/** A worker that does not answer the primary in this time counts as not ready, and with its last metrics. */
const ASK_TIMEOUT_MS = 1_000;
/** How often the primary asks each worker whether it is there (WORKER_UNRESPONSIVE_MS). */
const WATCH_EVERY_MS = 2_000;

/** The policy a message from the primary carries, compiled. The primary accepted this text, so it compiles here too. */
function compileGiven(message: Message & { type: 'policy' }): CompiledPolicy {
  const result = parsePolicy(message.source, message.file);
  if (!result.ok) throw new PolicyLoadError(result.errors);
  return result.policy;
}

/**
 * In a worker, as it starts: the policy the primary runs, asked for (a worker never reads the file),
 * and the port to listen on.
 */
export function policyFromPrimary(): Promise<{ policy: CompiledPolicy; port: number }> {
  return new Promise((resolve, reject) => {
    const done = () => {
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
    };
    const onMessage = (message: unknown) => {
      if (!isMessage(message) || message.type !== 'policy') return;
      done();
      try {
        resolve({ policy: compileGiven(message), port: message.port });
      } catch (err) {
        reject(err);
      }
    };
    const onDisconnect = () => {
      done();
      reject(new Error('the cluster primary went away before it gave this worker the policy'));
    };
    process.on('message', onMessage);
    process.on('disconnect', onDisconnect);
    if (!process.connected) return onDisconnect();
    // A primary that dies just now: the channel's error comes here, and 'disconnect' follows.
    process.send!({ tag: TAG, type: 'get-policy' } satisfies Message, undefined, {}, () => {});
  });
}

/** In a worker: obey the primary, and go when it goes. */
export function serveAsWorker(gateway: RunningGateway, logger: Logger): void {
  const stop = () =>
    void gateway.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  const send = (message: Message) => {
    if (process.connected) process.send!(message);
  };
  const usePolicyGiven = (message: Message & { type: 'policy' }) => {
    const from = gateway.policy.contentHash;
    try {
      gateway.usePolicy(compileGiven(message));
    } catch (err) {
      // The primary's readiness then says `policy: not_loaded` (this worker runs another policy).
      logger.error({ err, running: from }, "the primary's policy could not be compiled here; the running policy stays");
      return;
    }
    logger.info({ from, to: gateway.policy.contentHash }, 'policy applied');
  };
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.type === 'shutdown') stop();
    else if (message.type === 'policy') usePolicyGiven(message);
    else if (message.type === 'readiness') send({ tag: TAG, type: 'answer', id: message.id, readiness: gateway.readiness(), policy: gateway.policy.contentHash });
    else if (message.type === 'metrics') {
      void gateway.metrics.registry.getMetricsAsJSON().then((metrics) => send({ tag: TAG, type: 'answer', id: message.id, metrics }));
    }
  });
  // Ctrl-C and a SIGHUP to the process group reach every process: the primary decides and tells each worker.
  // (The start-up hold in the worker kept a SIGHUP before this; it is dropped: the file is the primary's.)
  process.on('SIGINT', () => {});
  process.on('SIGHUP', () => {});
  // Sent to this worker alone: it drains and goes, and the primary forks a replacement.
  process.on('SIGTERM', stop);
  // The primary is gone (killed): nobody would replace or stop this worker, so it drains and goes.
  // Node's own handler would exit at once, cutting requests in flight, unless told this is expected.
  cluster.worker!.exitedAfterDisconnect = true;
  process.on('disconnect', stop);
  send({ tag: TAG, type: 'ready', port: gateway.port, policy: gateway.policy.contentHash });
}

export class WorkerStartError extends Error {}

/** A port free on `host` just now, as the kernel picks one for a listen on port 0. */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * In the primary: binds the admin listener, forks `config.workers` workers and waits until each
 * listens. `policy` is the policy file's, as read and accepted at start-up. Resolves once running;
 * the process then ends on SIGTERM/SIGINT after every worker has drained. Rejects with
 * WorkerStartError when a worker cannot start (its own error is on stderr).
 */
export async function runPrimary(config: Config, logger: Logger, startUp: StartUpSignals, policy: LoadedPolicy): Promise<void> {
  /** Each live worker, and when it said it listens (performance.now()); undefined while it starts. */
  const workers = new Map<Worker, number | undefined>();
  const pacer = new RestartPacer();
  /** Replacements waiting out a pause (see RestartPacer); a shutdown cancels them. */
  const pausedReplacements = new Set<NodeJS.Timeout>();
  const pending = new Map<number, (answer: Message & { type: 'answer' }) => void>();
  let phase: 'starting' | 'running' | 'stopping' = 'starting';
  let askId = 0;
  let failedExits = 0;

  /** Asks each listening worker; resolves to each one asked, with its answer, or null when none came in time. */
  const askAll = async (type: 'readiness' | 'metrics') => {
    const asked = [...workers].filter(([w, since]) => since !== undefined && w.isConnected()).map(([w]) => w);
    const answers = await Promise.all(
      asked.map(
        (worker) =>
          new Promise<{ worker: Worker; answer: (Message & { type: 'answer' }) | null }>((resolveAnswer) => {
            const resolve = (answer: (Message & { type: 'answer' }) | null) => resolveAnswer({ worker, answer });
            const id = ++askId;
            const timer = setTimeout(() => {
              pending.delete(id);
              resolve(null);
            }, ASK_TIMEOUT_MS);
            pending.set(id, (answer) => {
              clearTimeout(timer);
              pending.delete(id);
              resolve(answer);
            });
            worker.send({ tag: TAG, type, id } satisfies Message);
          }),
      ),
    );
    return answers;
  };

  const readiness = async (): Promise<ReadinessCheck> => {
    // Each worker must run the policy accepted last: one that could not take it serves another. Last
    // as of the question: a worker takes messages in order, so its answer reflects every policy
    // accepted before it was asked, and none accepted while its answer was on the way back (judged
    // against one of those, a reload made readiness fail for the moments it takes to apply).
    const accepted = policyFile.accepted.policy.contentHash;
    const answers = (await askAll('readiness')).flatMap(({ answer }) => (answer === null ? [] : [answer]));
    const all = answers.map((answer) => answer.readiness!);
    return {
      policy: all.every((c) => c.policy === 'ok') && answers.every((answer) => answer.policy === accepted) ? 'ok' : 'not_loaded',
      key_store: all.every((c) => c.key_store === 'ok') ? 'ok' : 'unavailable',
      shutdown: phase === 'stopping' ? 'in_progress' : 'no',
      // Whether every worker is there and staying; why one is not ready is in the checks above.
      workers: all.length === config.workers && all.every((c) => c.shutdown === 'no') ? 'ok' : 'missing',
    };
  };
  const sums = new WorkerSums<Worker>((err, worker) => logger.warn({ err, worker_pid: worker.process.pid }, "a dead worker's counters could not be kept in the sums"));
  const primaryOwn = createPrimaryMetrics();
  const metricsText = async () => {
    const fresh = new Set<Worker>();
    for (const { worker, answer } of await askAll('metrics')) if (answer !== null && sums.answered(worker, answer.metrics!, answer.id)) fresh.add(worker);
    return (await sums.scrape(fresh, [await primaryOwn.collect()])).metrics();
  };

  const sendPolicy = (worker: Worker, { source }: LoadedPolicy) => worker.send({ tag: TAG, type: 'policy', file: config.policyFile, source, port } satisfies Message);
  const policyFile = new PolicyFile(config.policyFile, policy, {
    logger,
    reloads: primaryOwn.policyReloads,
    // A worker still starting is given it when it says it is ready, if what it asked for is older.
    onAccepted: (next) => {
      for (const [worker, since] of workers) if (since !== undefined && worker.isConnected()) sendPolicy(worker, next);
    },
  });

  // The admin port first: if it is taken, nothing has been forked yet.
  const admin = createAdminServer({ metrics: { contentType: AggregatorRegistry.PROMETHEUS_CONTENT_TYPE, text: metricsText }, readiness });
  const adminPort = await new Promise<number>((resolve, reject) => {
    admin.once('error', reject);
    admin.listen(config.adminPort, config.adminHost, () => resolve((admin.address() as AddressInfo).port));
  });
  // After the admin listener, which may have asked for port 0 too and now holds what it got.
  // PORT=0: one free port, chosen here, for every worker. Each asking for port 0 instead, they would
  // share a port only while one of them lives: replacements forked after all died would listen on
  // another, where no client looks.
  const port =
    config.port === 0
      ? await freePort(config.host).catch((err: NodeJS.ErrnoException) => {
          // Where the primary cannot listen, no worker could.
          admin.close();
          throw new WorkerStartError(`HOST: cannot listen on ${config.host} (${err.code ?? err.message})`);
        })
      : config.port;

  /**
   * A worker whose event loop is stuck (an endless loop, a SIGSTOP) serves nobody, yet lives, and is
   * still handed connections. Every WATCH_EVERY_MS each listening worker is asked how it is (given
   * ASK_TIMEOUT_MS to answer); one that has left about WORKER_UNRESPONSIVE_MS of questions in a row
   * unanswered (UnansweredQuestions) is killed, and replaced as any worker that dies.
   */
  const unanswered = new UnansweredQuestions<Worker>(Math.round(config.workerUnresponsiveMs / WATCH_EVERY_MS));
  /** When each worker last answered the watch (performance.now()): a stuck one served until then. */
  const lastAnswered = new Map<Worker, number>();
  /** The workers forked at start-up, whose failure to start fails the start (listening()). */
  const firstWorkers = new WeakSet<Worker>();
  const killedStuck = new WeakSet<Worker>();
  let watching = false;
  const watch = setInterval(() => {
    if (phase !== 'running' || watching) return;
    watching = true;
    void askAll('readiness').then((answers) => {
      watching = false;
      if (phase !== 'running') return;
      const now = performance.now();
      for (const { worker, answer } of answers) if (answer !== null && !worker.isDead()) lastAnswered.set(worker, now);
      for (const worker of unanswered.record(answers.map(({ worker, answer }) => ({ worker, answered: answer !== null })))) {
        if (worker.isDead()) continue;
        logger.error({ worker_pid: worker.process.pid, unanswered: unanswered.allowed, every_ms: WATCH_EVERY_MS }, 'a worker stopped answering: killed, to be replaced');
        killedStuck.add(worker);
        worker.process.kill('SIGKILL');
      }
    });
  }, WATCH_EVERY_MS);
  watch.unref();

  const fork = () => {
    const worker = cluster.fork();
    workers.set(worker, undefined);
    // One stuck before it listens is never asked anything: it has WORKER_UNRESPONSIVE_MS to start,
    // and is then killed, and counted as a worker that could not start.
    const startDeadline = setTimeout(() => {
      if (workers.get(worker) !== undefined || worker.isDead() || phase === 'stopping') return;
      logger.error({ worker_pid: worker.process.pid, deadline_ms: config.workerUnresponsiveMs }, 'a worker did not start in time: killed');
      worker.process.kill('SIGKILL');
    }, config.workerUnresponsiveMs);
    startDeadline.unref();
    worker.once('exit', () => clearTimeout(startDeadline));
    // A send to a worker that has just died fails here, not as an uncaught exception.
    worker.on('error', (err) => logger.warn({ err, worker_pid: worker.process.pid }, 'worker channel error'));
    worker.on('message', (message: unknown) => {
      if (!isMessage(message)) return;
      if (message.type === 'answer') pending.get(message.id)?.(message);
      else if (message.type === 'get-policy') sendPolicy(worker, policyFile.accepted);
      else if (message.type === 'ready') {
        clearTimeout(startDeadline);
        workers.set(worker, performance.now());
        // Forked while a shutdown was beginning: it never heard the order.
        if (phase === 'stopping') worker.send({ tag: TAG, type: 'shutdown' } satisfies Message);
        else if (message.policy !== policyFile.accepted.policy.contentHash) sendPolicy(worker, policyFile.accepted);
      }
    });
    return worker;
  };
  const listening = (worker: Worker) =>
    new Promise<number>((resolve, reject) => {
      const onMessage = (message: unknown) => {
        if (isMessage(message) && message.type === 'ready') {
          worker.off('exit', onExit);
          worker.off('message', onMessage);
          resolve(message.port);
        }
      };
      const onExit = (code: number | null, signal: string | null) => {
        worker.off('message', onMessage);
        reject(new WorkerStartError(`a worker could not start (exit ${code ?? signal}); its error is above`));
      };
      worker.on('message', onMessage);
      worker.once('exit', onExit);
    });

  let stopped: Promise<void> | undefined;
  const stop = (reason: string, exitCode: number): Promise<void> => {
    stopped ??= (async () => {
      phase = 'stopping';
      clearInterval(watch);
      policyFile.close();
      logger.info({ reason, workers: workers.size }, 'shutting down: every worker drains its requests');
      const gone = [...workers.keys()].map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))));
      for (const timer of pausedReplacements) clearTimeout(timer);
      pausedReplacements.clear();
      for (const [worker, since] of workers) {
        // One still starting has no handler yet: it serves nothing, so a plain SIGTERM ends it.
        if (since === undefined) worker.process.kill('SIGTERM');
        else if (worker.isConnected()) worker.send({ tag: TAG, type: 'shutdown' } satisfies Message);
      }
      // Each worker keeps its own deadline (SHUTDOWN_TIMEOUT_MS); this one is for a worker that hangs.
      const backstop = setTimeout(() => {
        failedExits++;
        logger.warn('workers still running past the shutdown deadline: killing them');
        for (const worker of workers.keys()) worker.process.kill('SIGKILL');
      }, config.shutdownTimeoutMs + 5_000);
      await Promise.all(gone);
      clearTimeout(backstop);
      admin.closeAllConnections();
      await new Promise((resolve) => admin.close(resolve));
      logger.info({ failed_workers: failedExits }, 'stopped');
      process.exit(failedExits > 0 ? 1 : exitCode);
    })();
    return stopped;
  };

  cluster.on('exit', (worker, code, signal) => {
    const listeningSince = workers.get(worker);
    const answeredAt = lastAnswered.get(worker);
    workers.delete(worker);
    lastAnswered.delete(worker);
    unanswered.forget(worker);
    sums.retire(worker);
    if (phase === 'stopping') {
      // Killed by a signal while it drained (the OOM killer, a SIGKILL): its requests were cut. One
      // still starting, which this process ends with SIGTERM, had none.
      if ((code !== 0 && code !== null) || (signal !== null && listeningSince !== undefined)) failedExits++;
      return;
    }
    const replaceAfter = (pauseMs: number, replace: () => void) => {
      if (pauseMs === 0) return replace();
      const timer = setTimeout(() => {
        pausedReplacements.delete(timer);
        replace();
      }, pauseMs);
      pausedReplacements.add(timer);
    };
    if (listeningSince === undefined) {
      // One of the first workers: listening() reports it, and the start fails.
      if (firstWorkers.has(worker)) return;
      const failed = { worker_pid: worker.process.pid, code, signal };
      // A replacement that cannot start is tried again after a growing pause while other workers
      // serve; with none left there is nothing to keep, and the gateway stops. (A replacement for one
      // of the first workers that died while the others were still starting is tried again as well:
      // they may yet start.)
      const serving = [...workers.values()].filter((since) => since !== undefined).length;
      if (serving === 0 && phase === 'running') {
        logger.fatal(failed, 'a replacement worker could not start and no worker is serving: stopping');
        void stop('worker could not start', 1);
        return;
      }
      const pauseMs = pacer.pauseAfter(0);
      logger.error({ ...failed, serving, pause_ms: pauseMs }, 'a replacement worker could not start (its error is above): the others keep serving; trying again after a pause');
      replaceAfter(pauseMs, () => fork());
      return;
    }
    // One killed for not answering served until its last answer, not until the kill: with the default
    // WORKER_UNRESPONSIVE_MS the kill alone comes about 10 s after a hang, which would pass a worker
    // that hangs as soon as it starts for one that served, and replace it without a pause, for ever.
    const servedUntil = killedStuck.has(worker) ? Math.max(answeredAt ?? listeningSince, listeningSince) : performance.now();
    const died = {
      worker_pid: worker.process.pid,
      code,
      signal,
      lived_ms: Math.round(performance.now() - listeningSince),
      ...(killedStuck.has(worker) ? { answered_for_ms: Math.round(servedUntil - listeningSince) } : {}),
    };
    const pauseMs = pacer.pauseAfter(Math.round(servedUntil - listeningSince));
    if (pauseMs > 0) logger.error({ ...died, pause_ms: pauseMs }, 'worker died soon after it started: replacing it after a pause');
    replaceAfter(pauseMs, () => {
      const replacement = fork();
      logger.error({ ...died, replacement_pid: replacement.process.pid }, 'worker died: replaced');
    });
  });

  const addSignalHandlers = () =>
    handleRunningSignals(logger, {
      stop: (signal) => void stop(signal, 0),
      stopNow: () => {
        for (const worker of workers.keys()) worker.process.kill('SIGKILL');
      },
      reload: () => void policyFile.reload('signal'),
    });
  // The file was read before this, and may have changed since the SIGHUP that says so.
  if (startUp.handOver(addSignalHandlers).reloadAsked) void policyFile.reload('signal');
  if (config.policyWatch) void policyFile.watch();

  const first = Array.from({ length: config.workers }, fork);
  for (const worker of first) firstWorkers.add(worker);
  try {
    await Promise.all(first.map(listening));
  } catch (err) {
    // A signal during start-up: the workers it stopped are not a failure to report.
    if (stopped !== undefined) return void (await stopped);
    phase = 'stopping';
    clearInterval(watch);
    policyFile.close();
    for (const worker of workers.keys()) worker.process.kill('SIGKILL');
    admin.close();
    throw err;
  }
  // Stopping already (a signal while the workers started): they listen only to drain.
  if (stopped !== undefined) return void (await stopped);
  phase = 'running';
  logger.info(
    { port, host: config.host, admin_port: adminPort, admin_host: config.adminHost, workers: [...workers.keys()].map((w) => w.process.pid) },
    'listening',
  );
}
