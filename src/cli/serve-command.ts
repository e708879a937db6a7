import cluster from 'node:cluster';
import { parseArgs } from 'node:util';
import { runPrimary, serveAsWorker, WorkerStartError } from '../cluster.js';
import { CONFIG_FIELDS, ConfigError, flagName, loadConfig } from '../config/env.js';
import { loadPolicyOrThrow, PolicyLoadError } from '../config/load-policy.js';
import { createLogger, type Logger } from '../logger.js';
import { startGateway, type RunningGateway } from '../server.js';
import type { StartUpSignals } from '../start-up-signals.js';
import { CommandError, UsageError } from './usage-error.js';

const SERVE_FLAGS = Object.fromEntries(
  Object.values(CONFIG_FIELDS).map((spec) => [flagName(spec.env), { type: 'string' as const }]),
);

/** Every setting, as a flag and as its variable, from the one config schema. */
export function serveUsage(): string {
  const lines = Object.values(CONFIG_FIELDS).map((spec) => {
    const fallback = spec.default === undefined ? 'required' : `default ${JSON.stringify(spec.default)}`;
    return `  --${flagName(spec.env)} (${spec.env}; ${fallback})\n      ${spec.description}`;
  });
  return ['usage: acquirer-gateway serve [--flag value …]', 'Each setting is a flag or its environment variable (the flag wins):', ...lines].join('\n');
}

/**
 * `acquirer-gateway serve`: runs until SIGTERM or SIGINT. `startUp` holds the signals until the
 * gateway's own handlers are in place (the CLI starts it before this module loads).
 */
export async function serveCommand(args: string[], startUp: StartUpSignals): Promise<void> {
  let flags: Record<string, string | undefined>;
  try {
    flags = parseArgs({ args, options: SERVE_FLAGS, strict: true, allowPositionals: false }).values as Record<string, string>;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  let config;
  try {
    config = loadConfig(process.env, flags);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
  const clustered = config.workers > 1;
  // With several processes writing one stream, each line says which one wrote it.
  const logger = createLogger(config.logLevel, undefined, clustered ? { pid: process.pid } : {});
  // A fault in one request's handling is logged, never allowed to take every other request down.
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
  startUp.flushLogsWith(() => logger.flush());
  if (clustered && cluster.isPrimary) {
    try {
      // One clear refusal of a bad policy here, rather than one from every worker.
      await loadPolicyOrThrow(config.policyFile);
      return await runPrimary(config, logger, startUp);
    } catch (err) {
      if (err instanceof PolicyLoadError) throw new CommandError(`policy refused:\n${err.message}`);
      if (err instanceof WorkerStartError) throw new CommandError(err.message);
      // Only the admin listener is the primary's own.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') throw new CommandError(`ADMIN_PORT: already in use (${(err as Error).message})`);
      if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') throw new CommandError(`ADMIN_HOST: cannot listen on ${config.adminHost} (${code})`);
      if (code === 'EACCES') throw new CommandError(`ADMIN_PORT: not allowed to listen on ${config.adminPort}`);
      throw err;
    }
  }
  const gateway = await startGateway(config, { logger, worker: clustered }).catch((err: unknown) => {
    if (err instanceof PolicyLoadError) throw new CommandError(`policy refused:\n${err.message}`);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new CommandError(`${clustered ? 'PORT' : 'PORT or ADMIN_PORT'}: already in use (${(err as Error).message})`);
    if (code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') throw new CommandError(`HOST: cannot listen on ${config.host} (${code})`);
    if (code === 'EACCES') throw new CommandError(`PORT: not allowed to listen on ${config.port}`);
    throw err;
  });
  const { reloadAsked } = startUp.handOver(() => (clustered ? serveAsWorker(gateway, logger) : handleSignals(gateway, logger)));
  // A worker's reloads come from the primary, which also sends one to a worker that was starting
  // when the SIGHUP came (a SIGHUP to the process group reaches both): reloading here too would be twice.
  if (reloadAsked && !clustered) void gateway.reloadPolicy();
}

/** A single process: SIGTERM or SIGINT drains and exits, a second one exits at once; SIGHUP reloads the policy. */
function handleSignals(gateway: RunningGateway, logger: Logger): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'signal received');
    gateway.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => void gateway.reloadPolicy());
}
