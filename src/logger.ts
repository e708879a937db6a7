import { pino, type Logger as PinoLogger } from 'pino';

export type Logger = Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal'>;

/** Header values and fields that could carry a secret; pino replaces them before serialising. */
const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'key',
  '*.key',
];

export function createLogger(level = 'info'): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { service: 'acquirer-gateway' } });
}

/** For tests and tools that must stay quiet. */
export const silentLogger: Logger = pino({ level: 'silent' });
