import { pino, stdSerializers, type Logger as PinoLogger } from 'pino';
import { LogWriter } from './log-writer.js';
import { redactSecrets } from './observability/redact.js';

/** A record of one level: strings, numbers, booleans and nulls only, so it serialises in one step. */
export type FlatRecord = Readonly<Record<string, string | number | boolean | null | undefined>>;

export interface Logger extends Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal'> {
  /**
   * The same line `info(record, msg)` or `warn(record, msg)` writes (same fields, same order, same
   * redaction), serialised in one pass over a record of one level (flatFields) instead of pino's
   * field-by-field walk and the scrub's: for the access log, a line per request, where those walks
   * were the gateway's largest own cost.
   */
  flat(level: 'info' | 'warn', record: FlatRecord, msg: string): void;
  /** Resolves true once every line so far has left the process; false after `timeoutMs` or when it cannot. */
  flush(timeoutMs: number): Promise<boolean>;
}

/** Fields that could carry a secret whatever its shape, in any case: replaced whole, at any depth. */
// Tested, not lower-cased: that made a string per field and line. `u` folds as toLowerCase did (K, the Kelvin sign).
const SECRET_FIELD = /^(?:authorization|key)$/iu;
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
    const clean = SECRET_FIELD.test(k) && v !== undefined && v !== null ? CENSORED : scrub(v, depth + 1);
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

/** A string as JSON: quoted as it is when it holds nothing JSON escapes (request ids, route ids, paths). */
function jsonString(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return JSON.stringify(text);
  }
  return `"${text}"`;
}

/** A flat record's field name, quoted for JSON and checked against SECRET_FIELD once, not on every line. */
type FieldName = { readonly quoted: string; readonly secret: boolean };
const fieldNames = new Map<string, FieldName>();
function fieldName(name: string): FieldName {
  let known = fieldNames.get(name);
  if (known === undefined) {
    known = { quoted: `${JSON.stringify(name)}:`, secret: SECRET_FIELD.test(name) };
    // Names come from the code, a dozen of them; the bound only guards against a caller that made them up.
    if (fieldNames.size < 256) fieldNames.set(name, known);
  }
  return known;
}

/**
 * A flat record as the fields of a JSON object (no braces): exactly what `JSON.stringify(scrub(record))`
 * writes, in one pass over the fields. Every string is redacted like any other; secret fields are
 * censored; a number that JSON cannot hold is null. `record` is a plain object literal.
 */
function flatFields(record: FlatRecord): string {
  let text = '';
  for (const name in record) {
    const value = record[name];
    if (value === undefined) continue;
    const field = fieldName(name);
    let json: string;
    if (value === null) json = 'null';
    else if (field.secret) json = `"${CENSORED}"`;
    else if (typeof value === 'string') json = jsonString(redactSecrets(value));
    else if (typeof value === 'number') json = Number.isFinite(value) ? String(value) : 'null';
    else json = value ? 'true' : 'false';
    text += text === '' ? field.quoted + json : `,${field.quoted}${json}`;
  }
  return text;
}

/** How long a log line may wait in the buffer when traffic is too light to fill it. */
const FLUSH_INTERVAL_MS = 200;
/** Lines are handed to the stream in blocks of at most this many bytes. */
const BLOCK_BYTES = 16 * 1024;
/** UTF-8 takes at most this many bytes for one UTF-16 unit of a string. */
const MAX_UTF8_PER_UNIT = 3;

const STDOUT = 1;
/** At exit, how long to wait for log lines still being written to a stdout whose reader is not reading. */
export const EXIT_LOG_PATIENCE_MS = 1000;

/** Where log lines go: a stream, or anything with its `write`; `flush` when it writes asynchronously. */
type LineSink = { write(text: string): unknown; flush?(timeoutMs: number): Promise<boolean> };

/**
 * Standard output, in blocks: each line is encoded once, into a 16 KiB block, and full blocks are
 * handed to a LogWriter as bytes, which writes them off the request path (one write per block, not
 * per line: a write per line cost more than building the line). Gathered as strings and joined, the
 * lines were copied three more times, and the join was a tenth of the access line's cost.
 * Handed over every 200 ms; at exit, the last block is written synchronously. A SIGKILL can lose
 * what is still buffered: at most 200 ms of lines.
 */
function bufferedStdout(): LineSink {
  const writer = new LogWriter(STDOUT);
  let block = Buffer.allocUnsafeSlow(BLOCK_BYTES);
  let used = 0;
  const handOver = () => {
    if (used === 0) return;
    // The writer keeps the bytes it is given until it has written them: a new block for what follows.
    writer.write(block.subarray(0, used));
    block = Buffer.allocUnsafeSlow(BLOCK_BYTES);
    used = 0;
  };
  setInterval(handOver, FLUSH_INTERVAL_MS).unref();
  // Nothing asynchronous runs after 'exit': handed over now, the last block would start a write that
  // the exit cuts short (up to a block of lines lost, in a test of exits).
  process.once('exit', () => {
    if (used > 0) writer.writeAtExit(block.subarray(0, used), EXIT_LOG_PATIENCE_MS);
  });
  return {
    write(line: string) {
      // Reserved by its worst case, so a line is never split between two blocks.
      const most = line.length * MAX_UTF8_PER_UNIT;
      if (used + most > BLOCK_BYTES) {
        handOver();
        if (most > BLOCK_BYTES) {
          writer.write(Buffer.from(line)); // a line of over 5k characters (a long stack): on its own
          return true;
        }
      }
      used += block.write(line, used);
      return true;
    },
    flush(timeoutMs: number) {
      handOver();
      return writer.flush(timeoutMs);
    },
  };
}

/** pino's numbers for the levels `flat` writes. */
const LEVEL_VALUES = { info: 30, warn: 40 } as const;

/**
 * JSON lines on stdout. Secrets are removed three ways: known fields by name, every string field
 * (error messages and stacks included) by pattern, and the message itself by pattern, so a key pasted
 * into a URL or echoed by a library error never reaches a log.
 */
export function createLogger(level = 'info', destination: LineSink | undefined = undefined, fields: Record<string, unknown> = {}): Logger {
  const base = { service: 'acquirer-gateway', ...fields };
  const sink = destination ?? bufferedStdout();
  const options = {
    level,
    base,
    serializers: { err: redactError },
    formatters: { log: (record: Record<string, unknown>) => scrub(record) as Record<string, unknown> },
    hooks: {
      logMethod(this: PinoLogger, args: Parameters<PinoLogger['info']>, method: (...a: unknown[]) => void) {
        method.apply(this, args.map((a) => (typeof a === 'string' ? redactSecrets(a) : a)));
      },
    },
  };
  const logger = pino(options, sink as Parameters<typeof pino>[1]);
  // pino's own order: level, time, the base fields, the record's, msg.
  const baseFields = JSON.stringify(scrub(base)).slice(1, -1);
  const afterTime = baseFields === '' ? '' : `,${baseFields}`;
  const flat = (lineLevel: 'info' | 'warn', record: FlatRecord, msg: string): void => {
    if (!logger.isLevelEnabled(lineLevel)) return;
    const fieldsText = flatFields(record);
    sink.write(
      `{"level":${LEVEL_VALUES[lineLevel]},"time":${Date.now()}${afterTime}${fieldsText === '' ? '' : `,${fieldsText}`},"msg":${jsonString(redactSecrets(msg))}}\n`,
    );
  };
  const flush = (timeoutMs: number): Promise<boolean> => sink.flush?.(timeoutMs) ?? Promise.resolve(true);
  return Object.assign(logger, { flat, flush });
}

/**
 * Ends the process once the lines logged so far have left it, or after EXIT_LOG_PATIENCE_MS when
 * its reader does not read them. process.exit() at once would cut short a write under way: the
 * lines after it would be lost (LogWriter.writeAtExit).
 */
export function exitOnceLogged(logger: Logger, code: number): void {
  void logger.flush(EXIT_LOG_PATIENCE_MS).then(() => process.exit(code));
}

/** For tests and tools that must stay quiet. */
export const silentLogger: Logger = createLogger('silent', { write: () => true });
