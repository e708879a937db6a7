import { constants } from 'node:os';
import type { Logger } from '../observability/logger/logger.js';

/** Signals that end a process by default, and that a running gateway answers with a drain. */
const ENDING = ['SIGTERM', 'SIGINT'] as const;

export interface StartUpSignals {
  /** What to write before a signal ends the process: the logger's buffered lines, once there is a logger. */
  flushLogsWith(flush: () => void): void;
  /**
   * Hands the signals over to the running gateway: `addRunningHandlers` adds its own handlers, and
   * only then are the start-up handlers removed. In that order, because a signal already received but
   * not yet handled goes to whichever handlers are there when the event loop next turns, and is
   * dropped if there are none (Node closes a signal's watch with its last listener).
   */
  handOver(addRunningHandlers: () => void): { readonly reloadAsked: boolean };
}

/**
 * From the start of `serve` until the gateway has its own handlers. A SIGTERM or SIGINT writes the
 * buffered log lines, then ends the process by the same signal, as Node's default would without
 * them (as PID 1, where the kernel ignores a signal's default action: exit 128 + its number). A
 * SIGHUP, which by default would kill a gateway still starting, is remembered: the policy may have
 * been read before the change it announces, so the caller reloads once running.
 */
export function holdSignalsDuringStartUp(): StartUpSignals {
  let reloadAsked = false;
  let flushLogs = () => {};
  const onHup = () => {
    reloadAsked = true;
  };
  const remove = () => {
    for (const signal of ENDING) process.off(signal, end);
    process.off('SIGHUP', onHup);
  };
  function end(signal: NodeJS.Signals) {
    flushLogs();
    if (process.pid === 1) process.exit(128 + constants.signals[signal]);
    // With no listener left, Node restores the default action, and the signal ends the process.
    remove();
    process.kill(process.pid, signal);
  }
  for (const signal of ENDING) process.on(signal, end);
  process.on('SIGHUP', onHup);
  return {
    flushLogsWith(flush) {
      flushLogs = flush;
    },
    handOver(addRunningHandlers) {
      addRunningHandlers();
      remove();
      return { reloadAsked };
    },
  };
}

export interface RunningSignalActions {
  /** The first SIGTERM or SIGINT: drain and exit. */
  stop(signal: NodeJS.Signals): void;
  /** A second one while stopping, just before the process exits with 1 (the cluster primary kills its workers). */
  stopNow?(): void;
  /** SIGHUP: read the policy file again. */
  reload(): void;
}

/**
 * The signals of a running gateway (one process, the cluster primary, the quickstart): SIGTERM or
 * SIGINT drains, a second one exits at once (an operator who pressed Ctrl-C twice means it), and
 * SIGHUP reloads the policy. A cluster worker has its own: the primary decides for it.
 */
export function handleRunningSignals(logger: Logger, actions: RunningSignalActions): void {
  let stopping = false;
  const onEnding = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.event('second_signal', { signal });
      actions.stopNow?.();
      process.exit(1);
    }
    stopping = true;
    logger.event('signal_received', { signal });
    actions.stop(signal);
  };
  for (const signal of ENDING) process.on(signal, onEnding);
  process.on('SIGHUP', () => actions.reload());
}
