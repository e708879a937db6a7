/**
 * @module
 * The primary's workers: forked, told the policy, watched for a stuck event loop (heartbeat.ts),
 * replaced when they die (after a pause when they die young: restart-pacer.ts), and stopped.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Config } from '../config/env.js';
import type { Logger } from '../observability/logger/logger.js';
import type { LoadedPolicy } from '../policy/load.js';
import { UnansweredQuestions } from './heartbeat.js';
import { isMessage, TAG, type Message } from './ipc.js';
import type { WorkerQuestions } from './questions.js';
import { RestartPacer } from './restart-pacer.js';

/** How often the primary asks each worker whether it is there (WORKER_UNRESPONSIVE_MS). */
export const WATCH_EVERY_MS = 2_000;

export class WorkerStartError extends Error {}

export interface SupervisorDeps {
  readonly config: Pick<Config, 'workers' | 'workerUnresponsiveMs' | 'shutdownTimeoutMs' | 'policyFile' | 'policyShadowFile'>;
  readonly logger: Logger;
  readonly questions: WorkerQuestions;
  /** The public port every worker listens on. */
  readonly port: number;
  /** The policy accepted last, which every worker is to run. */
  readonly policy: () => LoadedPolicy;
  /** The shadow policy accepted last (POLICY_SHADOW_FILE), which every worker is to judge by; undefined: none. */
  readonly shadow: () => LoadedPolicy | undefined;
  /** A worker is gone for good: its counters are kept in the sums. */
  readonly onGone: (worker: Worker) => void;
  /** No worker serves and a replacement could not start: the gateway stops. */
  readonly onNoneServing: () => void;
}

export class WorkerSupervisor {
  readonly #deps: SupervisorDeps;
  /** Each live worker, and when it said it listens (performance.now()); undefined while it starts. */
  readonly #workers = new Map<Worker, number | undefined>();
  readonly #pacer = new RestartPacer();
  /** Replacements waiting out a pause (see RestartPacer); a shutdown cancels them. */
  readonly #paused = new Set<NodeJS.Timeout>();
  readonly #unanswered: UnansweredQuestions<Worker>;
  /** When each worker last answered the watch (performance.now()): a stuck one served until then. */
  readonly #lastAnswered = new Map<Worker, number>();
  /** The workers forked at start-up, whose failure to start fails the start (startAll). */
  readonly #first = new WeakSet<Worker>();
  readonly #killedStuck = new WeakSet<Worker>();
  #watch: NodeJS.Timeout | undefined;
  #phase: 'starting' | 'running' | 'stopping' = 'starting';
  /** Workers that failed as they drained, or had to be killed: the primary's exit says so. */
  failedExits = 0;

  constructor(deps: SupervisorDeps) {
    this.#deps = deps;
    this.#unanswered = new UnansweredQuestions<Worker>(Math.round(deps.config.workerUnresponsiveMs / WATCH_EVERY_MS));
    cluster.on('exit', (worker, code, signal) => this.#onExit(worker, code, signal));
  }

  get stopping(): boolean {
    return this.#phase === 'stopping';
  }

  /** The workers that listen and can be asked. */
  listening(): Worker[] {
    return [...this.#workers].filter(([w, since]) => since !== undefined && w.isConnected()).map(([w]) => w);
  }

  /** How many workers there are, listening or starting, and how many there should be. */
  get counts(): { readonly live: number; readonly wanted: number } {
    return { live: this.#workers.size, wanted: this.#deps.config.workers };
  }

  pids(): (number | undefined)[] {
    return [...this.#workers.keys()].map((w) => w.process.pid);
  }

  /** Forks the first workers and resolves once each listens; rejects with WorkerStartError if one cannot start. */
  async startAll(): Promise<void> {
    const first = Array.from({ length: this.#deps.config.workers }, () => this.#fork());
    for (const worker of first) this.#first.add(worker);
    await Promise.all(first.map((worker) => this.#listening(worker)));
    if (this.#phase === 'starting') this.#phase = 'running';
  }

  /** Sends every listening worker the policy just accepted. */
  policyAccepted(next: LoadedPolicy): void {
    for (const [worker, since] of this.#workers) if (since !== undefined && worker.isConnected()) this.#sendPolicy(worker, next);
  }

  /** Sends every listening worker the shadow policy just accepted. */
  shadowAccepted(next: LoadedPolicy): void {
    for (const [worker, since] of this.#workers) if (since !== undefined && worker.isConnected()) this.#sendShadow(worker, next);
  }

  /** Every WATCH_EVERY_MS, each listening worker is asked how it is; one stuck long enough is killed (and replaced). */
  watch(): void {
    let asking = false;
    this.#watch = setInterval(() => {
      if (this.#phase !== 'running' || asking) return;
      asking = true;
      void this.#deps.questions.ask(this.listening(), 'readiness').then((answers) => {
        asking = false;
        if (this.#phase === 'running') this.#killStuck(answers);
      });
    }, WATCH_EVERY_MS);
    this.#watch.unref();
  }

  /** Each worker drains (one still starting is ended); resolves once all are gone, killing any past the deadline. */
  async drainAll(): Promise<void> {
    this.#beginStopping();
    const gone = [...this.#workers.keys()].map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once('exit', () => resolve()))));
    for (const [worker, since] of this.#workers) {
      // One still starting has no handler yet: it serves nothing, so a plain SIGTERM ends it.
      if (since === undefined) worker.process.kill('SIGTERM');
      else if (worker.isConnected()) worker.send({ tag: TAG, type: 'shutdown' } satisfies Message);
    }
    // Each worker keeps its own deadline (SHUTDOWN_TIMEOUT_MS); this one is for a worker that hangs.
    const backstop = setTimeout(() => {
      this.failedExits++;
      this.#deps.logger.event('workers_killed_at_deadline');
      this.killAll();
    }, this.#deps.config.shutdownTimeoutMs + 5_000);
    await Promise.all(gone);
    clearTimeout(backstop);
  }

  /** A start that failed, or a second signal: every worker killed at once. */
  killAll(): void {
    this.#beginStopping();
    for (const worker of this.#workers.keys()) worker.process.kill('SIGKILL');
  }

  #beginStopping(): void {
    this.#phase = 'stopping';
    clearInterval(this.#watch);
    for (const timer of this.#paused) clearTimeout(timer);
    this.#paused.clear();
  }

  #killStuck(answers: readonly { worker: Worker; answer: unknown }[]): void {
    const now = performance.now();
    for (const { worker, answer } of answers) if (answer !== null && !worker.isDead()) this.#lastAnswered.set(worker, now);
    for (const worker of this.#unanswered.record(answers.map(({ worker, answer }) => ({ worker, answered: answer !== null })))) {
      if (worker.isDead()) continue;
      this.#deps.logger.event('worker_unresponsive', { worker_pid: worker.process.pid, unanswered: this.#unanswered.allowed, every_ms: WATCH_EVERY_MS });
      this.#killedStuck.add(worker);
      worker.process.kill('SIGKILL');
    }
  }

  /** `withShadow`: the answer to a starting worker's `get-policy`, which starts with the shadow policy too. */
  #sendPolicy(worker: Worker, { source }: LoadedPolicy, withShadow = false): void {
    const shadow = withShadow ? this.#deps.shadow() : undefined;
    const shadowText = shadow === undefined ? {} : { shadow: { file: this.#deps.config.policyShadowFile, source: shadow.source } };
    worker.send({ tag: TAG, type: 'policy', file: this.#deps.config.policyFile, source, port: this.#deps.port, ...shadowText } satisfies Message);
  }

  #sendShadow(worker: Worker, { source }: LoadedPolicy): void {
    worker.send({ tag: TAG, type: 'shadow-policy', file: this.#deps.config.policyShadowFile, source } satisfies Message);
  }

  #fork(): Worker {
    const worker = cluster.fork();
    this.#workers.set(worker, undefined);
    // One stuck before it listens is never asked anything: it has WORKER_UNRESPONSIVE_MS to start,
    // and is then killed, and counted as a worker that could not start.
    const startDeadline = setTimeout(() => {
      if (this.#workers.get(worker) !== undefined || worker.isDead() || this.stopping) return;
      this.#deps.logger.event('worker_start_timeout', { worker_pid: worker.process.pid, deadline_ms: this.#deps.config.workerUnresponsiveMs });
      worker.process.kill('SIGKILL');
    }, this.#deps.config.workerUnresponsiveMs);
    startDeadline.unref();
    worker.once('exit', () => clearTimeout(startDeadline));
    // A send to a worker that has just died fails here, not as an uncaught exception.
    worker.on('error', (err) => this.#deps.logger.event('worker_channel_error', { err, worker_pid: worker.process.pid }));
    worker.on('message', (message: unknown) => {
      if (!isMessage(message)) return;
      if (message.type === 'answer') this.#deps.questions.answered(message);
      else if (message.type === 'get-policy') this.#sendPolicy(worker, this.#deps.policy(), true);
      else if (message.type === 'ready') {
        clearTimeout(startDeadline);
        this.#workers.set(worker, performance.now());
        // Forked while a shutdown was beginning: it never heard the order.
        if (this.stopping) return void worker.send({ tag: TAG, type: 'shutdown' } satisfies Message);
        // Accepted while it started, after it was given the policies: it was sent neither.
        if (message.policy !== this.#deps.policy().policy.contentHash) this.#sendPolicy(worker, this.#deps.policy());
        const shadow = this.#deps.shadow();
        if (shadow !== undefined && message.shadow !== shadow.policy.contentHash) this.#sendShadow(worker, shadow);
      }
    });
    return worker;
  }

  #listening(worker: Worker): Promise<number> {
    return new Promise<number>((resolve, reject) => {
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
  }

  #onExit(worker: Worker, code: number | null, signal: string | null): void {
    const listeningSince = this.#workers.get(worker);
    const answeredAt = this.#lastAnswered.get(worker);
    this.#workers.delete(worker);
    this.#lastAnswered.delete(worker);
    this.#unanswered.forget(worker);
    this.#deps.onGone(worker);
    if (this.stopping) {
      // Killed by a signal while it drained (the OOM killer, a SIGKILL): its requests were cut. One
      // still starting, which the primary ends with SIGTERM, had none.
      if ((code !== 0 && code !== null) || (signal !== null && listeningSince !== undefined)) this.failedExits++;
      return;
    }
    if (listeningSince === undefined) return this.#replaceUnstarted(worker, code, signal);
    this.#replaceDead(worker, code, signal, listeningSince, answeredAt);
  }

  /**
   * A replacement that cannot start is tried again after a growing pause while other workers serve;
   * with none left there is nothing to keep, and the gateway stops. (One of the first workers fails
   * the start instead: startAll.)
   */
  #replaceUnstarted(worker: Worker, code: number | null, signal: string | null): void {
    if (this.#first.has(worker)) return;
    const failed = { worker_pid: worker.process.pid, code, signal };
    const serving = [...this.#workers.values()].filter((since) => since !== undefined).length;
    if (serving === 0 && this.#phase === 'running') {
      this.#deps.logger.event('no_worker_serving', failed);
      return this.#deps.onNoneServing();
    }
    const pauseMs = this.#pacer.pauseAfter(0);
    this.#deps.logger.event('replacement_failed', { ...failed, serving, pause_ms: pauseMs });
    this.#after(pauseMs, () => this.#fork());
  }

  /**
   * One killed for not answering served until its last answer, not until the kill: the kill alone
   * comes about WORKER_UNRESPONSIVE_MS after a hang, which would pass a worker that hangs as soon as
   * it starts for one that served, and replace it without a pause, for ever.
   */
  #replaceDead(worker: Worker, code: number | null, signal: string | null, listeningSince: number, answeredAt: number | undefined): void {
    const stuck = this.#killedStuck.has(worker);
    const servedUntil = stuck ? Math.max(answeredAt ?? listeningSince, listeningSince) : performance.now();
    const died = {
      worker_pid: worker.process.pid,
      code,
      signal,
      lived_ms: Math.round(performance.now() - listeningSince),
      ...(stuck ? { answered_for_ms: Math.round(servedUntil - listeningSince) } : {}),
    };
    const pauseMs = this.#pacer.pauseAfter(Math.round(servedUntil - listeningSince));
    if (pauseMs > 0) this.#deps.logger.event('worker_died_soon', { ...died, pause_ms: pauseMs });
    this.#after(pauseMs, () => {
      const replacement = this.#fork();
      this.#deps.logger.event('worker_replaced', { ...died, replacement_pid: replacement.process.pid });
    });
  }

  #after(pauseMs: number, replace: () => void): void {
    if (pauseMs === 0) return replace();
    const timer = setTimeout(() => {
      this.#paused.delete(timer);
      replace();
    }, pauseMs);
    this.#paused.add(timer);
  }
}
