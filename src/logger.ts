import { pino, stdSerializers, type Logger as PinoLogger } from 'pino';
import { redactSecrets } from './observability/redact.js';

export type Logger = Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal'>;

/** Fields that could carry a secret; pino replaces them before serialising. */
const REDACT_PATHS = ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', '*.key'];

/** Every string in a log record, a few levels deep, with anything shaped like a key replaced. */
function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactSecrets(value);
  // Errors are left to the err serializer, which redacts their message and stack.
  if (depth > 8 || value === null || typeof value !== 'object' || value instanceof Error) return value;
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrub(v, depth + 1);
  return out;
}

/**
 * Errors in full (message, stack, cause, aggregated errors, any own field), every string redacted.
 * A failed Redis command carries its arguments (an AUTH password, for one): only its name is kept.
 */
function redactError(err: Error) {
  if (!(err instanceof Error)) return scrub(err);
  const serialized = stdSerializers.err(err) as ReturnType<typeof stdSerializers.err> & { command?: { name?: unknown } };
  if (serialized.command !== undefined) serialized.command = { name: serialized.command?.name };
  return scrub(serialized);
}

/**
 * JSON lines on stdout. Secrets are removed three ways: known fields by path, every string field
 * (error messages and stacks included) by pattern, and the message itself by pattern, so a key pasted
 * into a URL or echoed by a library error never reaches a log.
 */
export function createLogger(level = 'info', destination: NodeJS.WritableStream | undefined = undefined): Logger {
  const options = {
    level,
    base: { service: 'acquirer-gateway' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { err: redactError },
    formatters: { log: (record: Record<string, unknown>) => scrub(record) as Record<string, unknown> },
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
