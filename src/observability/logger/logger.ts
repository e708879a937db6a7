import { fstatSync } from 'node:fs';
import { pino, stdSerializers, type Logger as PinoLogger } from 'pino';
import { LOG_EVENTS, type LogEvent, type LogLevel } from './log-events.js';
import { LogWriter, PIPE_BUF } from './log-writer.js';
import { CENSORED, flatFields, jsonString, SECRET_FIELD, type FlatRecord } from './flat-fields.js';
import { redactSecrets } from '../../secrets/redact.js';

export type { FlatRecord };

export interface Logger extends Pick<PinoLogger, 'info' | 'warn' | 'error' | 'debug' | 'fatal' | 'flush'> {
  /** The line of a known event (log-events.ts), at its level, with `event` first among `fields`. */
  readonly event: (name: LogEvent, fields?: Readonly<Record<string, unknown>>) => void;
  /**
   * The line `event(name, record)` writes, byte for byte but for the time, serialised in one pass
   * (flat-fields.ts) instead of pino's walk: for the lines written per request.
   */
  readonly flatEvent: (name: LogEvent, record: FlatRecord) => void;
  /** The line `info(record, msg)` or `warn(record, msg)` writes, serialised as flatEvent's is. */
  readonly flat: (level: 'info' | 'warn', record: FlatRecord, msg: string) => void;
}

/** pino's numbers for its levels. */
const LEVEL_VALUES: Readonly<Record<LogLevel, number>> = { info: 30, warn: 40, error: 50, fatal: 60 };


/** Objects nested deeper than this are not walked (a cycle would never end), and so not written either. */
const MAX_SCRUB_DEPTH = 8;
const TOO_DEEP = '[redacted: nested too deep]';

/**
 * Every string in a log record, with anything shaped like a key replaced, and every secret field
 * censored. A record with nothing to replace (nearly every one) comes back as the same object: one
 * walk and no copy per log line.
 */
function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactSecrets(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_SCRUB_DEPTH) return TOO_DEEP;
  // Bytes are never written, only counted: a parse error's `rawPacket` holds what the upstream sent
  // (statement rows), and walked field by field it is one JSON field per byte, out of sight of the
  // key redaction.
  if (ArrayBuffer.isView(value)) return `[${value.byteLength} bytes]`;
  if (value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  // One under `err` was serialized already (pino's serializers run first); one anywhere else is here.
  if (value instanceof Error) return redactError(value, depth);
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
    const clean = SECRET_FIELD.test(k) && v !== undefined && v !== null ? CENSORED : k === 'command' ? redisCommand(v, depth) : scrub(v, depth + 1);
    if (clean !== v) out ??= { ...value };
    if (out !== undefined) out[k] = clean;
  }
  return out ?? value;
}

/** Errors in full (message, stack, cause, aggregated errors, any own field), every string redacted. */
function redactError(err: Error, depth = 0): unknown {
  if (!(err instanceof Error)) return scrub(err, depth);
  let serialized: unknown;
  try {
    serialized = stdSerializers.err(err);
  } catch {
    // pino's serializer follows `errors` without minding cycles: an AggregateError that holds itself
    // (or an ancestor) overflows the stack, and the log call would throw into whoever logged.
    serialized = { type: err.constructor?.name ?? 'Error', message: String(err.message), stack: String(err.stack), errors: '[redacted: refers to itself]' };
  }
  return scrub(serialized, depth);
}

/**
 * A failed Redis command, as ioredis attaches it to its errors (`command: { name, args }`), at any
 * depth (an error's cause, an error held by another): its name only. Its arguments can hold an AUTH
 * password or a key's record.
 */
function redisCommand(value: unknown, depth: number): unknown {
  if (value !== null && typeof value === 'object' && 'args' in value) return { name: scrub((value as { name?: unknown }).name, depth + 1) };
  return scrub(value, depth + 1);
}

/** How long a log line may wait in the buffer when traffic is too light to fill it. */
const FLUSH_INTERVAL_MS = 200;
/**
 * Lines are written in blocks of at most this many bytes, one system call each (64 KiB, a Linux
 * pipe's buffer). With WORKERS above 1 the processes share stdout, and so does stderr when it is the
 * same file: then a block is at most PIPE_BUF, which a pipe takes atomically.
 */
const SOLE_WRITER_BLOCK_BYTES = 64 * 1024;
/** UTF-8 takes at most this many bytes for one UTF-16 unit of a string. */
const MAX_UTF8_PER_UNIT = 3;

const STDOUT = 1;
/** At exit, how long a non-blocking stdout's reader may take nothing before the rest is given up. */
const EXIT_WRITE_PATIENCE_MS = 5000;

/** Where log lines go: a stream, or anything with its `write` (and a `flush`, which pino's calls). */
type LineSink = { write(text: string): unknown; flush?(done: (err?: Error) => void): void };

/**
 * Standard output, in blocks: each line is encoded once into a block of at most `blockBytes`, written
 * with one system call when full, every 200 ms, at exit and on `flush()` (signals.ts). A SIGKILL can
 * lose what is still buffered: at most 200 ms of lines.
 */
function bufferedStdout(blockBytes: number, shared: boolean): LineSink {
  const writer = new LogWriter(STDOUT);
  // Written synchronously, or copied by the writer when refused: one block serves for ever.
  const block = Buffer.allocUnsafeSlow(blockBytes);
  let used = 0;
  const writeBlock = () => {
    if (used === 0) return void writer.retry();
    writer.write(block.subarray(0, used));
    used = 0;
  };
  /** Everything buffered, now, waiting for a non-blocking stdout's reader as at exit: for a process about to end. */
  const writeAll = () => {
    writer.writeAtExit(used > 0 ? block.subarray(0, used) : undefined, EXIT_WRITE_PATIENCE_MS);
    used = 0;
  };
  setInterval(writeBlock, FLUSH_INTERVAL_MS).unref();
  process.once('exit', writeAll);
  return {
    flush(done) {
      writeAll();
      done();
    },
    write(line: string) {
      // The worst case first: counting the bytes exactly is only needed near the end of the block.
      if (used + line.length * MAX_UTF8_PER_UNIT > blockBytes) {
        const bytes = Buffer.byteLength(line);
        // A line is never split between two blocks.
        if (used + bytes > blockBytes) writeBlock();
        if (bytes > blockBytes) {
          // A line longer than a block (a long stack), on its own. On a shared stdout it cannot be
          // written atomically: it goes out whole before anything else of this process's (its stderr
          // when that is the same pipe), waiting for the reader if it must.
          if (shared) writer.writeWhole(Buffer.from(line));
          else writer.write(Buffer.from(line));
          return true;
        }
      }
      used += block.write(line, used);
      return true;
    },
  };
}

/**
 * Whether stdout and stderr are one file (`2>&1`, a supervisor's single pipe). Then the process
 * shares stdout after all: a larger block that a non-blocking pipe takes in part can have Node's
 * own stderr (a warning, a crash's stack) written into the middle of a line.
 */
function stdoutIsStderr(): boolean {
  try {
    const [out, err] = [fstatSync(1), fstatSync(2)];
    return out.dev === err.dev && out.ino === err.ino;
  } catch {
    return true; // either closed or unknown: the small, safe block
  }
}

/**
 * JSON lines on stdout. Secrets are removed three ways: known fields by name, every string field
 * (error messages and stacks included) by pattern, and the message itself by pattern, so a key pasted
 * into a URL or echoed by a library error never reaches a log. `sharedStdout`: other processes write
 * to the same stdout (WORKERS above 1), so blocks stay within PIPE_BUF and lines never mix.
 */
export function createLogger(
  level = 'info',
  destination: LineSink | undefined = undefined,
  fields: Record<string, unknown> = {},
  { sharedStdout = false, eventLevels = {} }: { sharedStdout?: boolean; eventLevels?: Partial<Record<LogEvent, LogLevel>> } = {},
): Logger {
  const base = { service: 'acquirer-gateway', ...fields };
  const shared = sharedStdout || stdoutIsStderr();
  const sink = destination ?? bufferedStdout(shared ? PIPE_BUF : SOLE_WRITER_BLOCK_BYTES, shared);
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
  const event = (name: LogEvent, fields?: Readonly<Record<string, unknown>>): void => {
    const { level, msg } = LOG_EVENTS[name];
    logger[eventLevels[name] ?? level]({ event: name, ...fields }, msg);
  };
  // pino's own order: level, time, the base fields, the record's, msg.
  const baseFields = JSON.stringify(scrub(base)).slice(1, -1);
  const afterTime = baseFields === '' ? '' : `,${baseFields}`;
  // Read once per level change, not per line: pino's logger is a hash table to V8, and each look at it costs.
  let lowest = logger.levelVal;
  logger.on('level-change', () => (lowest = logger.levelVal));
  const writeFlat = (levelValue: number, fields: string, msg: string): void => {
    if (levelValue < lowest) return;
    sink.write(`{"level":${levelValue},"time":${Date.now()}${afterTime}${fields === '' ? '' : `,${fields}`},"msg":${jsonString(redactSecrets(msg))}}\n`);
  };
  const flat = (level: 'info' | 'warn', record: FlatRecord, msg: string): void => {
    if (LEVEL_VALUES[level] >= lowest) writeFlat(LEVEL_VALUES[level], flatFields(record), msg);
  };
  const flatEvent = (name: LogEvent, record: FlatRecord): void => {
    const { level, msg } = LOG_EVENTS[name];
    const value = LEVEL_VALUES[eventLevels[name] ?? level];
    if (value < lowest) return;
    const fields = flatFields(record);
    writeFlat(value, fields === '' ? `"event":${jsonString(name)}` : `"event":${jsonString(name)},${fields}`, msg);
  };
  return Object.assign(logger, { event, flatEvent, flat });
}

/** For tests and tools that must stay quiet. */
export const silentLogger: Logger = createLogger('silent', { write: () => true });
