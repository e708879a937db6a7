import { pino, stdSerializers, type Logger as PinoLogger } from 'pino';
import { redactSecrets } from './observability/redact.js';

export type Logger = Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal'>;

/** Fields that could carry a secret whatever its shape: replaced whole, at any depth. */
const SECRET_FIELDS = new Set(['authorization', 'key']);
const CENSORED = '[redacted]';

/**
 * Every string in a log record, a few levels deep, with anything shaped like a key replaced, and
 * every secret field censored. A record with nothing to replace (nearly every one) comes back as the
 * same object: one walk and no copy per log line.
 */
function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactSecrets(value);
  // Errors are left to the err serializer, which redacts their message and stack.
  if (depth > 8 || value === null || typeof value !== 'object' || value instanceof Error) return value;
  if (Array.isArray(value)) {
    const items = value.map((v) => scrub(v, depth + 1));
    return items.some((v, i) => v !== value[i]) ? items : value;
  }
  // Anything but a plain object is rebuilt from its own fields, as before: kept as it is, a toJSON
  // (a URL's, with its password) would decide what reaches the log.
  const proto = Object.getPrototypeOf(value);
  let out: Record<string, unknown> | undefined = proto === Object.prototype || proto === null ? undefined : {};
  for (const k in value) {
    if (!Object.hasOwn(value, k)) continue;
    const v = (value as Record<string, unknown>)[k];
    const clean = SECRET_FIELDS.has(k.toLowerCase()) && v !== undefined && v !== null ? CENSORED : scrub(v, depth + 1);
    if (clean !== v) out ??= { ...value };
    if (out !== undefined) out[k] = clean;
  }
  return out ?? value;
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

/** How long a log line may wait in the stdout buffer when traffic is too light to fill it. */
const FLUSH_INTERVAL_MS = 200;

/**
 * Standard output, written asynchronously in blocks of at least 4 KiB (one write per block, not per
 * line, and never on the request path) and flushed every 200 ms, and when the process exits (pino
 * flushes it synchronously on exit). A SIGKILL can lose what is still buffered: at most 200 ms of lines.
 */
function bufferedStdout() {
  const stream = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  setInterval(() => {
    try {
      stream.flush();
    } catch {
      // Destroyed (stdout closed): nothing more can be written anyway.
    }
  }, FLUSH_INTERVAL_MS).unref();
  return stream;
}

/**
 * JSON lines on stdout. Secrets are removed three ways: known fields by name, every string field
 * (error messages and stacks included) by pattern, and the message itself by pattern, so a key pasted
 * into a URL or echoed by a library error never reaches a log.
 */
export function createLogger(level = 'info', destination: NodeJS.WritableStream | undefined = undefined, fields: Record<string, unknown> = {}): Logger {
  const options = {
    level,
    base: { service: 'acquirer-gateway', ...fields },
    serializers: { err: redactError },
    formatters: { log: (record: Record<string, unknown>) => scrub(record) as Record<string, unknown> },
    hooks: {
      logMethod(this: PinoLogger, args: Parameters<PinoLogger['info']>, method: (...a: unknown[]) => void) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactSecrets(a) : a)));
      },
    },
  };
  return pino(options, (destination ?? bufferedStdout()) as Parameters<typeof pino>[1]);
}

/** For tests and tools that must stay quiet. */
export const silentLogger: Logger = pino({ level: 'silent' });
