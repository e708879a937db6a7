import { pino, stdSerializers, type Logger as PinoLogger } from 'pino';
import { redactSecrets } from './observability/redact.js';

export type Logger = Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal'>;

/** Fields that could carry a secret; pino replaces them before serialising. */
const REDACT_PATHS = ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', '*.key'];

function redactError(err: Error) {
  const serialized = stdSerializers.err(err);
  serialized.message = redactSecrets(serialized.message);
  if (serialized.stack) serialized.stack = redactSecrets(serialized.stack);
  return serialized;
}

/**
 * JSON lines on stdout. Secrets are removed three ways: known fields by path, error messages and
 * stacks by pattern, and the message string itself by pattern, so a key pasted into a URL or echoed
 * by a library error never reaches a log.
 */
export function createLogger(level = 'info', destination: NodeJS.WritableStream | undefined = undefined): Logger {
  const options = {
    level,
    base: { service: 'acquirer-gateway' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { err: redactError },
    hooks: {
      logMethod(this: PinoLogger, args: Parameters<PinoLogger['info']>, method: (...a: unknown[]) => void) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactSecrets(a) : a)));
      },
    },
  };
  return destination === undefined ? pino(options) : pino(options, destination as Parameters<typeof pino>[1]);
}

/** For tests and tools that must stay quiet. */
export const silentLogger: Logger = pino({ level: 'silent' });
