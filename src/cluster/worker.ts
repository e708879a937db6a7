/**
 * @module
 * A cluster worker (WORKERS above 1): it runs the policy the primary gives it, answers the primary's
 * questions, and drains and goes when told, or when the primary goes.
 */
import type { RunningGateway } from '../gateway.js';
import { shutdownThenExit } from '../lifecycle/exit.js';
import { outliveThePrimary } from '../node-internals/cluster-worker.js';
import type { Logger } from '../observability/logger/logger.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { compileGiven, isMessage, TAG, type Message, type PolicyMessage, type ShadowPolicyMessage } from './ipc.js';

/** What a worker starts with, from the primary. */
export interface GivenPolicies {
  readonly policy: CompiledPolicy;
  /** The public port. */
  readonly port: number;
  /** The shadow policy (POLICY_SHADOW_FILE); undefined when the primary runs none. */
  readonly shadow: CompiledPolicy | undefined;
}

/**
 * As the worker starts: the policy the primary runs, and its shadow policy if any, asked for (a
 * worker never reads the files), and the port to listen on.
 */
export function policyFromPrimary(): Promise<GivenPolicies> {
  return new Promise((resolve, reject) => {
    const done = () => {
      process.off('message', onMessage);
      process.off('disconnect', onDisconnect);
    };
    const onMessage = (message: unknown) => {
      if (!isMessage(message) || message.type !== 'policy') return;
      done();
      try {
        resolve({ policy: compileGiven(message), port: message.port, shadow: message.shadow === undefined ? undefined : compileGiven(message.shadow) });
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

/** Obey the primary, and go when it goes. `shadow`: the shadow policy the gateway was started with, if any. */
export function serveAsWorker(gateway: RunningGateway, logger: Logger, shadow: CompiledPolicy | undefined): void {
  const stop = () => shutdownThenExit(gateway, logger);
  // The gateway judges by it and does not say which it is: the worker keeps its hash, for `ready`.
  const runningShadow = { hash: shadow?.contentHash };
  const send = (message: Message) => {
    if (process.connected) process.send!(message);
  };
  process.on('message', (message: unknown) => {
    if (!isMessage(message)) return;
    if (message.type === 'shutdown') stop();
    else if (message.type === 'policy') usePolicyGiven(gateway, message, logger);
    else if (message.type === 'shadow-policy') useShadowGiven(gateway, message, logger, runningShadow);
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
  outliveThePrimary();
  process.on('disconnect', stop);
  send({ tag: TAG, type: 'ready', port: gateway.port, policy: gateway.policy.contentHash, shadow: runningShadow.hash });
}

function usePolicyGiven(gateway: RunningGateway, message: PolicyMessage, logger: Logger): void {
  const from = gateway.policy.contentHash;
  try {
    gateway.usePolicy(compileGiven(message));
  } catch (err) {
    // The primary's readiness then says `policy: not_loaded` (this worker runs another policy).
    logger.event('policy_not_applied', { err, running: from });
    return;
  }
  logger.event('policy_applied', { from, to: gateway.policy.contentHash });
}

function useShadowGiven(gateway: RunningGateway, message: ShadowPolicyMessage, logger: Logger, running: { hash: string | undefined }): void {
  const from = running.hash;
  let next: CompiledPolicy;
  try {
    next = compileGiven(message);
    gateway.useShadowPolicy(next);
  } catch (err) {
    logger.event('shadow_policy_not_applied', { err, running: from });
    return;
  }
  running.hash = next.contentHash;
  logger.event('shadow_policy_applied', { from, to: next.contentHash });
}
