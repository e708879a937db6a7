import cluster, { type Worker } from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry } from 'prom-client';
import { createAdminServer, isReady, type ReadinessCheck } from './admin/admin-server.js';
import type { Config } from './config/env.js';
import type { Logger } from './logger.js';
import type { RunningGateway } from './server.js';

/**
 * WORKERS above 1: one primary process and that many workers (node:cluster), all serving the one
 * public port. The primary serves no requests; it forks the workers, answers the admin endpoints for
 * all of them (metrics summed, readiness only if every worker is ready), passes signals on, and
 * replaces a worker that dies. Messages between them are tagged so prom-client's own pass through.
 */
type Message =
  | { readonly tag: 'acquirer-gateway'; readonly type: 'ready'; readonly port: number }
  | { readonly tag: 'acquirer-gateway'; readonly type: 'shutdown' | 'reload' }
  | { readonly tag: 'acquirer-gateway'; readonly type: 'readiness'; readonly id: number; readonly checks?: ReadinessCheck };

const TAG = 'acquirer-gateway' as const;
const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;

/** A worker that does not answer a readiness question in this time counts as not ready. */
const READINESS_ASK_MS = 1_000;

/** In a worker: obey the primary, and go when it goes. */
export function serveAsWorker(gateway: RunningGateway, logger: Logger): void {
  // prom-client answers the primary's metric requests from this registry.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([gateway.metrics.registry]);
  const stop = () =>
    void gateway.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.type === 'shutdown') stop();
    else if (message.type === 'reload') void gateway.reloadPolicy();
    else if (message.type === 'readiness' && process.connected) {
      process.send!({ tag: TAG, type: 'readiness', id: message.id, checks: gateway.readiness() } satisfies Message);
    }
  });
  // Ctrl-C reaches the whole process group: the primary decides, and tells each worker.
  process.on('SIGINT', () => {});
  // Sent to this worker alone: it drains and goes, and the primary forks a replacement.
  process.on('SIGTERM', stop);
  process.on('SIGHUP', () => void gateway.reloadPolicy());
  // The primary is gone (killed): nobody would replace or stop this worker.
  process.on('disconnect', stop);
  process.send!({ tag: TAG, type: 'ready', port: gateway.port } satisfies Message);
}

export class WorkerStartError extends Error {}

/**
 * In the primary: forks `config.workers` workers, waits until each listens, then serves the admin
 * endpoints. Resolves once running; the process then ends on SIGTERM/SIGINT after every worker has
 * drained. Rejects with WorkerStartError when a worker cannot start (its own error is on stderr).
 */
export async function runPrimary(config: Config, logger: Logger): Promise<void> {
  const aggregator = new AggregatorRegistry();
  /** Each live worker, and whether it has said it listens. */
  const started = new Map<Worker, boolean>();
  let stopping = false;
  let askId = 0;

  const fork = () => {
    const worker = cluster.fork();
    started.set(worker, false);
    return worker;
  };
  const ready = (worker: Worker) =>
    new Promise<number>((resolve, reject) => {
      const onMessage = (message: unknown) => {
        if (isMessage(message) && message.type === 'ready') {
          started.set(worker, true);
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

  const workers = Array.from({ length: config.workers }, fork);
  let port: number | undefined;
  try {
    [port] = await Promise.all(workers.map(ready));
  } catch (err) {
    stopping = true;
    for (const worker of started.keys()) worker.process.kill('SIGKILL');
    throw err;
  }

  cluster.on('exit', (worker, code, signal) => {
    const hadStarted = started.get(worker) === true;
    started.delete(worker);
    if (stopping) return;
    if (!hadStarted) {
      // A replacement that cannot even start would be replaced for ever: stop instead.
      logger.fatal({ pid: worker.process.pid, code, signal }, 'a replacement worker could not start: stopping every worker');
      void stop('worker could not start', 1);
      return;
    }
    const replacement = fork();
    ready(replacement).catch(() => {}); // its exit before ready is handled above
    logger.error({ pid: worker.process.pid, code, signal, replacement_pid: replacement.process.pid }, 'worker died: replaced');
  });

  /** Asks every live worker for its readiness; one that does not answer in time is not ready. */
  const readiness = async (): Promise<ReadinessCheck> => {
    const live = [...started.keys()].filter((w) => w.isConnected());
    const answers = await Promise.all(
      live.map(
        (worker) =>
          new Promise<ReadinessCheck | null>((resolve) => {
            const id = ++askId;
            const timer = setTimeout(() => done(null), READINESS_ASK_MS);
            const onMessage = (message: unknown) => {
              if (isMessage(message) && message.type === 'readiness' && message.id === id) done(message.checks ?? null);
            };
            const done = (checks: ReadinessCheck | null) => {
              clearTimeout(timer);
              worker.off('message', onMessage);
              resolve(checks);
            };
            worker.on('message', onMessage);
            worker.send({ tag: TAG, type: 'readiness', id } satisfies Message);
          }),
      ),
    );
    const all = answers.filter((a): a is ReadinessCheck => a !== null);
    return {
      policy: all.every((c) => c.policy === 'ok') ? 'ok' : 'not_loaded',
      key_store: all.every((c) => c.key_store === 'ok') ? 'ok' : 'unavailable',
      shutdown: stopping || all.some((c) => c.shutdown !== 'no') ? 'in_progress' : 'no',
      workers: all.length === config.workers && all.every(isReady) ? 'ok' : 'missing',
    };
  };

  const admin = createAdminServer({ metrics: { contentType: aggregator.contentType, text: () => aggregator.clusterMetrics() }, readiness });
  const adminPort = await new Promise<number>((resolve, reject) => {
    admin.once('error', reject);
    admin.listen(config.adminPort, config.adminHost, () => resolve((admin.address() as AddressInfo).port));
  }).catch((err: unknown) => {
    stopping = true;
    for (const worker of started.keys()) worker.process.kill('SIGKILL');
    throw err;
  });
  logger.info(
    { port, host: config.host, admin_port: adminPort, admin_host: config.adminHost, workers: [...started.keys()].map((w) => w.process.pid) },
    'listening',
  );

  let stopped: Promise<void> | undefined;
  const stop = (reason: string, exitCode: number): Promise<void> => {
    stopped ??= (async () => {
      stopping = true;
      logger.info({ reason, workers: started.size }, 'shutting down: every worker drains its requests');
      const gone = [...started.keys()].map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))));
      for (const worker of started.keys()) if (worker.isConnected()) worker.send({ tag: TAG, type: 'shutdown' } satisfies Message);
      // Each worker keeps its own deadline (SHUTDOWN_TIMEOUT_MS); this one is for a worker that hangs.
      const backstop = setTimeout(() => {
        logger.warn('workers still running past the shutdown deadline: killing them');
        for (const worker of started.keys()) worker.process.kill('SIGKILL');
      }, config.shutdownTimeoutMs + 5_000);
      await Promise.all(gone);
      clearTimeout(backstop);
      admin.closeAllConnections();
      await new Promise((resolve) => admin.close(resolve));
      logger.info('stopped');
      process.exit(exitCode);
    })();
    return stopped;
  };
  let signalled = false;
  const onSignal = (signal: string) => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting now');
      for (const worker of started.keys()) worker.process.kill('SIGKILL');
      process.exit(1);
    }
    signalled = true;
    void stop(signal, 0);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGHUP', () => {
    for (const worker of started.keys()) if (worker.isConnected()) worker.send({ tag: TAG, type: 'reload' } satisfies Message);
  });
}
