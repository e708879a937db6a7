import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../logger.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { formatPolicyError, loadPolicy } from './load-policy.js';

/** File events come in bursts (editors, atomic renames, ConfigMap symlink swaps): wait for quiet. */
const WATCH_DEBOUNCE_MS = 100;

export type ReloadResult = 'success' | 'unchanged' | 'failure';

/**
 * Holds the running policy and replaces it, whole, when a new valid one is loaded. Requests read
 * `current` once when they arrive, so a swap never changes a request mid-way. An invalid file is
 * refused with its reasons logged, and the running policy stays.
 */
export class PolicyHolder {
  #current: CompiledPolicy;
  readonly #file: string;
  readonly #logger: Logger;
  readonly #metrics: GatewayMetrics;
  #watcher: FSWatcher | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #reloading: Promise<ReloadResult> | undefined;
  #again = false;

  constructor(file: string, initial: CompiledPolicy, deps: { logger: Logger; metrics: GatewayMetrics }) {
    this.#file = file;
    this.#current = initial;
    this.#logger = deps.logger;
    this.#metrics = deps.metrics;
    this.#metrics.policyInfo.set({ hash: initial.contentHash }, 1);
  }

  get current(): CompiledPolicy {
    return this.#current;
  }

  /** Loads the file again; concurrent calls share one load, and a call during a load runs once more after it. */
  reload(trigger: 'signal' | 'file'): Promise<ReloadResult> {
    if (this.#reloading !== undefined) {
      this.#again = true;
      return this.#reloading;
    }
    this.#reloading = this.#load(trigger).finally(() => {
      this.#reloading = undefined;
      if (this.#again) {
        this.#again = false;
        void this.reload(trigger);
      }
    });
    return this.#reloading;
  }

  /** Reloads when the file changes. The directory is watched, so a file replaced by rename is seen too. */
  watch(): void {
    const dir = path.dirname(this.#file);
    const base = path.basename(this.#file);
    this.#watcher = watch(dir, { persistent: false }, (_event, name) => {
      if (name !== null && name !== base && !name.startsWith('..')) return;
      clearTimeout(this.#debounce);
      this.#debounce = setTimeout(() => void this.reload('file'), WATCH_DEBOUNCE_MS);
    });
    this.#watcher.on('error', (err) => this.#logger.error({ err, file: this.#file }, 'policy file watch failed; reload with SIGHUP'));
  }

  close(): void {
    clearTimeout(this.#debounce);
    this.#watcher?.close();
  }

  async #load(trigger: 'signal' | 'file'): Promise<ReloadResult> {
    const result = await loadPolicy(this.#file);
    if (!result.ok) {
      this.#metrics.policyReloads.inc({ result: 'failure' });
      this.#logger.error(
        { file: this.#file, trigger, errors: result.errors.map(formatPolicyError), running: this.#current.contentHash },
        'policy reload refused; the running policy stays',
      );
      return 'failure';
    }
    const next = result.policy;
    if (next.contentHash === this.#current.contentHash) {
      this.#metrics.policyReloads.inc({ result: 'unchanged' });
      return 'unchanged';
    }
    const previous = this.#current;
    this.#current = next;
    this.#metrics.policyInfo.reset();
    this.#metrics.policyInfo.set({ hash: next.contentHash }, 1);
    this.#metrics.policyReloads.inc({ result: 'success' });
    this.#logger.info({ file: this.#file, trigger, from: previous.contentHash, to: next.contentHash, routes: next.routes.length }, 'policy reloaded');
    return 'success';
  }
}
