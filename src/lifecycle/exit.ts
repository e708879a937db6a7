/**
 * @module
 * The one way a serving process ends: drain, then exit 0; a shutdown that fails is logged, exit 1.
 */
import type { Logger } from '../observability/logger/logger.js';

export function shutdownThenExit(gateway: { shutdown(): Promise<void> }, logger: Logger): void {
  gateway.shutdown().then(
    () => process.exit(0),
    (err: unknown) => {
      logger.event('shutdown_failed', { err });
      process.exit(1);
    },
  );
}
