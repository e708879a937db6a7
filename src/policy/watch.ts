import { unwatchFile, watch, watchFile, type FSWatcher, type Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Counter } from 'prom-client';
import type { Logger } from '../observability/logger/logger.js';
import { formatPolicyError, loadPolicy, MAX_POLICY_BYTES, type LoadedPolicy } from './load.js';
import { readAtMost } from './read-at-most.js';

/** File events come in bursts (editors, atomic renames, ConfigMap symlink swaps): wait for quiet. */
const WATCH_DEBOUNCE_MS = 100;
/**
 * How often the file's status is also looked at: a change that raises no event in the watched
 * directory (the directory itself replaced whole, a filesystem without change events) is seen this
 * late.
 */
const STAT_POLL_MS = 2_000;
/**
 * How long a reload waits on a named pipe put where the policy file was, for a writer and its last
 * byte. Unbounded, a pipe nobody writes held every later reload behind it for good.
 */
export const RELOAD_PIPE_WAIT_MS = 10_000;

/** What says a file changed, as a poll of its status sees it. */
const signature = (stats: Stats): string => `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;

/** The log events of a reload accepted and refused, by the policy the file holds. */
const RELOAD_EVENTS = {
  enforced: { reloaded: 'policy_reloaded', refused: 'policy_reload_refused' },
  shadow: { reloaded: 'shadow_policy_reloaded', refused: 'shadow_policy_refused' },
} as const;

export type ReloadResult = 'success' | 'unchanged' | 'failure';

export interface PolicyFileOptions {
  readonly logger: Logger;
  /** `policy_reloads_total`, counted once per reload whatever the number of processes serving; none for the shadow. */
  readonly reloads?: Counter<'result'>;
  /** Which policy the file holds, and so which log events its reloads write: the enforced one unless told. */
  readonly holds?: keyof typeof RELOAD_EVENTS;
  /** Each policy accepted after the first: the one process's requests, or (WORKERS) every worker. */
  readonly onAccepted: (next: LoadedPolicy) => void;
  /** RELOAD_PIPE_WAIT_MS unless told (tests). */
  readonly pipeWaitMs?: number;
}

/**
 * The policy file, and the last policy read from it that was accepted. One reader per gateway: the
 * single process, or with WORKERS the primary, so that every worker runs what was accepted, and a
 * worker started after a refused or a not yet reloaded edit runs what its siblings run. The file is
 * read again on SIGHUP and, once `watch()`ed, when it changes; a file that is refused is logged with
 * its reasons and counted, and the accepted policy stays.
 */
export class PolicyFile {
  readonly #file: string;
  readonly #options: PolicyFileOptions;
  #accepted: LoadedPolicy;
  #watcher: FSWatcher | undefined;
  #poll: ((current: Stats) => void) | undefined;
  /** The file's status when it was last read (null when it could not be), for the poll to compare. */
  #readAs: string | null = null;
  #debounce: NodeJS.Timeout | undefined;
  #reloading: Promise<ReloadResult> | undefined;
  /** What asked for a reload while one ran: it runs once more after it, for the last asker. */
  #again: 'signal' | 'file' | undefined;

  constructor(file: string, initial: LoadedPolicy, options: PolicyFileOptions) {
    this.#file = file;
    this.#accepted = initial;
    this.#options = options;
  }

  get accepted(): LoadedPolicy {
    return this.#accepted;
  }

  /** Reads the file again; concurrent calls share one read, and a call during a read runs once more after it. */
  reload(trigger: 'signal' | 'file'): Promise<ReloadResult> {
    if (this.#reloading !== undefined) {
      this.#again = trigger;
      return this.#reloading;
    }
    this.#reloading = this.#load(trigger).finally(() => {
      this.#reloading = undefined;
      const again = this.#again;
      this.#again = undefined;
      if (again !== undefined) void this.reload(again);
    });
    return this.#reloading;
  }

  /**
   * Reloads when the file changes. The directory is watched, so a file replaced by rename is seen
   * too, and the file's status is polled every STAT_POLL_MS for what raises no event there. An edit
   * made between the read the accepted policy came from and now raised no event: the file is read
   * once more, and reloaded if it differs; the promise settles once that look is over.
   */
  watch(): Promise<void> {
    const dir = path.dirname(this.#file);
    const base = path.basename(this.#file);
    this.#watcher = watch(dir, { persistent: false }, (_event, name) => {
      if (name !== null && name !== base && !name.startsWith('..')) return;
      this.#reloadSoon();
    });
    this.#watcher.on('error', (err) => this.#options.logger.event('policy_watch_failed', { err, file: this.#file }));
    // Through the same wait for quiet as the events, and only for a status other than the one last
    // read: an edit the directory's events announced is not read a second time.
    this.#poll = (current) => {
      const seen = current.ino === 0 && current.mtimeMs === 0 ? null : signature(current); // all zero: gone
      if (seen !== this.#readAs) this.#reloadSoon();
    };
    watchFile(this.#file, { persistent: false, interval: STAT_POLL_MS }, this.#poll);
    return this.#unlessPipe(() =>
      readAtMost(this.#file, MAX_POLICY_BYTES, { pipeWaitMs: this.#pipeWaitMs }).then(
        (read) => {
          if (read.over || read.bytes.toString('utf8') !== this.#accepted.source) void this.reload('file');
        },
        () => void this.reload('file'), // gone or unreadable: the reload says so
      ),
    );
  }

  /**
   * Runs what the watch does, unless the file is a named pipe: writing to a pipe changes its status,
   * and a read to compare would wait on it and take what a writer meant for the next SIGHUP. A pipe
   * is reloaded on SIGHUP only.
   */
  async #unlessPipe(run: () => unknown): Promise<void> {
    const pipe = await stat(this.#file).then(
      (stats) => stats.isFIFO(),
      () => false,
    );
    if (!pipe) await run();
  }

  get #pipeWaitMs(): number {
    return this.#options.pipeWaitMs ?? RELOAD_PIPE_WAIT_MS;
  }

  close(): void {
    clearTimeout(this.#debounce);
    this.#watcher?.close();
    if (this.#poll !== undefined) unwatchFile(this.#file, this.#poll);
  }

  #reloadSoon(): void {
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.#unlessPipe(() => this.reload('file')), WATCH_DEBOUNCE_MS);
  }

  async #load(trigger: 'signal' | 'file'): Promise<ReloadResult> {
    const { logger, reloads, onAccepted, holds = 'enforced' } = this.#options;
    const events = RELOAD_EVENTS[holds];
    // Before the read: a change after it shows as another status, and is read again.
    this.#readAs = await stat(this.#file).then(signature, () => null);
    // loadPolicy reports every problem of the file's as a refusal; anything it throws is ours, and
    // refused all the same: the running policy stays, and the refusal is counted and logged.
    const result = await loadPolicy(this.#file, { pipeWaitMs: this.#pipeWaitMs }).catch((err: unknown) => ({
      ok: false as const,
      errors: [{ file: this.#file, line: 0, column: 0, message: `the policy could not be loaded: ${(err as Error).message}` }],
    }));
    const running = this.#accepted.policy;
    if (!result.ok) {
      reloads?.inc({ result: 'failure' });
      logger.event(events.refused, { file: this.#file, trigger, errors: result.errors.map(formatPolicyError), running: running.contentHash });
      return 'failure';
    }
    if (result.policy.contentHash === running.contentHash) {
      reloads?.inc({ result: 'unchanged' });
      return 'unchanged';
    }
    this.#accepted = { policy: result.policy, source: result.source };
    reloads?.inc({ result: 'success' });
    logger.event(events.reloaded, { file: this.#file, trigger, from: running.contentHash, to: result.policy.contentHash, routes: result.policy.routes.length });
    onAccepted(this.#accepted);
    return 'success';
  }
}
