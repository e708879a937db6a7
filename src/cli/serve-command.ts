import cluster from 'node:cluster';
import { runPrimary, WorkerStartError } from '../cluster/primary.js';
import { policyFromPrimary, serveAsWorker } from '../cluster/worker.js';
import { CONFIG_FIELDS, type Config } from '../config/env.js';
import { ConfigError, flagName, loadConfig } from '../config/load-config.js';
import { retiredSettingsIn } from '../config/retired-settings.js';
import { loadPolicyOrThrow, PolicyLoadError, type LoadedPolicy } from '../policy/load.js';
import { createLogger, type Logger } from '../observability/logger/logger.js';
import { followPolicyFile, followShadowFile, ListenError, startGateway } from '../gateway.js';
import { shutdownThenExit } from '../lifecycle/exit.js';
import { handleRunningSignals, type StartUpSignals } from '../lifecycle/signals.js';
import { CommandError, parseCommandLine, UsageError } from './command-line.js';

const SERVE_FLAGS = Object.fromEntries(
  Object.values(CONFIG_FIELDS).map((spec) => [flagName(spec.env), { type: 'string' as const }]),
);

/** Every setting, one line each, from the one config schema; the whole story is in docs/configuration.md. */
export function serveUsage(): string {
  const lines = Object.values(CONFIG_FIELDS).map((spec) => {
    const fallback = spec.default === undefined ? 'required' : spec.default === '' ? 'none' : spec.default;
    return `  --${flagName(spec.env).padEnd(26)} ${spec.summary} [${fallback}]`;
  });
  return [
    'usage: acquirer-gateway serve [--flag value …]',
    'Runs the gateway. Each setting is an environment variable (PORT) or the flag of that name',
    '(--port); the flag wins. [default]',
    ...lines,
    'Every setting, what it does and why: docs/configuration.md.',
  ].join('\n');
}

/**
 * `acquirer-gateway serve`: runs until SIGTERM or SIGINT. `startUp` holds the signals until the
 * gateway's own handlers are in place (the CLI starts it before this module loads).
 */
export async function serveCommand(args: string[], startUp: StartUpSignals): Promise<void> {
  const flags = parseCommandLine(args, SERVE_FLAGS, false).values as Record<string, string | undefined>;
  let config;
  try {
    config = loadConfig(process.env, flags);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
  const clustered = config.workers > 1;
  // With several processes writing one stream, each line says which one wrote it.
  const logger = createLogger(config.logLevel, undefined, clustered ? { pid: process.pid } : {}, { sharedStdout: clustered });
  // A fault in one request's handling is logged, never allowed to take every other request down.
  process.on('unhandledRejection', (reason) => logger.event('unhandled_rejection', { err: reason }));
  // A throw outside any request (a timer, an event listener) leaves the process in a state nobody
  // knows: it ends, as Node's default has it end, but said as a log line like any other, JSON and
  // redacted, where Node would print the raw error to stderr.
  process.on('uncaughtException', (err) => {
    logger.event('uncaught_exception', { err });
    process.exit(1);
  });
  startUp.flushLogsWith(() => logger.flush());
  if (clustered && cluster.isWorker) return serveWorker(config, logger, startUp);
  for (const retired of retiredSettingsIn(process.env)) logger.event('setting_retired', retired);
  // The one process, or the primary: the only reader of the policy files.
  const policy = await loadPolicyOrThrow(config.policyFile).catch((err: unknown) => {
    if (err instanceof PolicyLoadError) throw new CommandError(`policy refused:\n${err.message}`);
    throw err;
  });
  const shadow = await loadShadowPolicy(config);
  if (clustered) {
    try {
      return await runPrimary(config, logger, startUp, policy, shadow);
    } catch (err) {
      if (err instanceof WorkerStartError) throw new CommandError(err.message);
      // Only the admin listener is the primary's own.
      throw listenFailure(err, 'admin', config);
    }
  }
  const gateway = await startGateway(config, { logger, policy: policy.policy, shadowPolicy: shadow?.policy }).catch((err: unknown) => {
    throw err instanceof ListenError ? listenFailure(err.cause, err.listener, config) : err;
  });
  const files = [followPolicyFile(gateway, config, policy, logger), ...(shadow === undefined ? [] : [followShadowFile(gateway, config, shadow, logger)])];
  // The files were read before this, and may have changed since the SIGHUP that says so.
  const reload = () => files.forEach((file) => void file.reload('signal'));
  const running = {
    stop: () => {
      files.forEach((file) => file.close());
      shutdownThenExit(gateway, logger);
    },
    reload,
  };
  if (startUp.handOver(() => handleRunningSignals(logger, running)).reloadAsked) reload();
}

/** POLICY_SHADOW_FILE, read and refused as POLICY_FILE is (with WORKERS, by the primary, which gives it to the workers). */
async function loadShadowPolicy(config: Config): Promise<LoadedPolicy | undefined> {
  if (config.policyShadowFile === '') return undefined;
  return loadPolicyOrThrow(config.policyShadowFile).catch((err: unknown) => {
    if (err instanceof PolicyLoadError) throw new CommandError(`shadow policy refused (POLICY_SHADOW_FILE):\n${err.message}`);
    throw err;
  });
}

/**
 * A cluster worker runs the policy (and the shadow policy) the primary gives it, and never reads the
 * files: a worker forked after an edit that was refused, or not yet reloaded, runs what the others
 * run. The primary tells it of each change; a SIGHUP to the worker itself, kept during start-up or
 * not, is the primary's to act on.
 */
async function serveWorker(config: Config, logger: Logger, startUp: StartUpSignals): Promise<void> {
  const { policy, port, shadow } = await policyFromPrimary().catch((err: unknown) => {
    if (err instanceof PolicyLoadError) throw new CommandError(`the primary's policy could not be compiled here:\n${err.message}`);
    throw err;
  });
  const gateway = await startGateway({ ...config, port }, { logger, policy, worker: true, shadowPolicy: shadow }).catch((err: unknown) => {
    throw err instanceof ListenError ? listenFailure(err.cause, 'gateway', config) : err;
  });
  startUp.handOver(() => serveAsWorker(gateway, logger, shadow));
}

/** The error to report for a listen that failed: one naming the setting behind it, where one is to blame. */
function listenFailure(err: unknown, listener: 'gateway' | 'admin', config: Config): unknown {
  const [hostSetting, host, portSetting, port] =
    listener === 'admin' ? ['ADMIN_HOST', config.adminHost, 'ADMIN_PORT', config.adminPort] : ['HOST', config.host, 'PORT', config.port];
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new CommandError(`${portSetting}: already in use (${(err as Error).message})`);
  if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') return new CommandError(`${hostSetting}: cannot listen on ${host} (${code})`);
  if (code === 'EACCES') return new CommandError(`${portSetting}: not allowed to listen on ${port}`);
  return err;
}
