/** Signals that end a process by default, and that `serve` answers with a drain once it is running. */
const ENDING = ['SIGTERM', 'SIGINT'] as const;

export interface StartUpSignals {
  /** Removes the start-up handlers, just before the running gateway's own are added. */
  release(): { readonly reloadAsked: boolean };
}

/**
 * From the start of `serve` until the gateway has its own signal handlers. Node's defaults would end
 * the process at once: on SIGTERM or SIGINT without the `exit` event, so the log lines still
 * buffered (up to 200 ms of them, the ones that say what start-up was doing) were lost; and on
 * SIGHUP, the policy-reload signal, so a reload sent to a gateway that was starting killed it.
 *
 * Here a SIGTERM or SIGINT writes the buffered lines and then ends the process by the same signal,
 * as the default would have: whoever waits for the process (a supervisor, the cluster primary for a
 * worker still starting) sees what it saw before. A SIGHUP is remembered, and `release` says so:
 * the policy may have been read before the change it announces, so the caller reloads once running.
 */
export function holdSignalsDuringStartUp(flushLogs: () => void): StartUpSignals {
  let reloadAsked = false;
  const onHup = () => {
    reloadAsked = true;
  };
  const remove = () => {
    for (const signal of ENDING) process.off(signal, end);
    process.off('SIGHUP', onHup);
  };
  function end(signal: NodeJS.Signals) {
    flushLogs();
    // With no listener left, Node restores the default action, and the signal ends the process.
    remove();
    process.kill(process.pid, signal);
  }
  for (const signal of ENDING) process.on(signal, end);
  process.on('SIGHUP', onHup);
  return {
    release() {
      remove();
      return { reloadAsked };
    },
  };
}
