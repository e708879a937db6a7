/**
 * @module
 * A policy file read, validated against the schema and compiled, or refused with every reason,
 * each located by file, line and column.
 */
import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { redactKeysAndBodies } from '../secrets/redact.js';
import { compilePolicy, type CompiledPolicy } from './compile.js';
import { policySchema } from './schema.js';
import { readAtMost } from './read-at-most.js';
import { offsetOf, readPolicyYaml, type DocPath, type PolicyError } from './read-yaml.js';

export type { PolicyError };


/** A policy that was accepted, and the text it was read from (which a cluster primary hands its workers). */
export interface LoadedPolicy {
  readonly policy: CompiledPolicy;
  readonly source: string;
}

export type PolicyLoadResult = ({ ok: true } & LoadedPolicy) | { ok: false; errors: PolicyError[] };

export function formatPolicyError(error: PolicyError): string {
  return `${error.file}:${error.line}:${error.column}: ${error.message}`;
}

/** Thrown by loadPolicyOrThrow; its message holds one line per problem. */
export class PolicyLoadError extends Error {
  readonly errors: readonly PolicyError[];

  constructor(errors: readonly PolicyError[]) {
    super(errors.map(formatPolicyError).join('\n'));
    this.name = 'PolicyLoadError';
    this.errors = errors;
  }
}

function describePath(path: DocPath): string {
  return path.length === 0 ? '' : `${path.map(String).join('.')}: `;
}

/** What zod calls the kinds of value a policy holds, as a person who wrote the file would. */
const KIND_NAMES: Readonly<Record<string, string>> = { array: 'a list', object: 'a mapping', string: 'text', number: 'a number', boolean: 'true or false', null: 'empty' };

/** The value at `path` in the parsed document, or undefined when it is not there. */
function valueAt(data: unknown, path: DocPath): unknown {
  let value = data;
  for (const key of path) value = value !== null && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}

/** A field of the wrong kind or missing, said in words: `routes.4.permissions is required`. */
function describeIssue(issue: z.core.$ZodIssue, data: unknown): string {
  if (issue.code === 'too_small' && issue.origin === 'array') return `${describePath(issue.path)}must list at least ${String(issue.minimum)}`;
  if (issue.code === 'too_small' && issue.origin === 'string' && Number(issue.minimum) === 1) return `${describePath(issue.path)}must not be empty`;
  if (issue.code !== 'invalid_type') return `${describePath(issue.path)}${issue.message}`;
  const actual = valueAt(data, issue.path);
  const where = issue.path.map(String).join('.');
  if (actual === undefined) return `${where === '' ? 'the policy' : where} is required`;
  const kind = actual === null ? 'null' : Array.isArray(actual) ? 'array' : typeof actual;
  return `${describePath(issue.path)}must be ${KIND_NAMES[issue.expected] ?? issue.expected}, not ${KIND_NAMES[kind] ?? kind}`;
}

/**
 * Parses and validates a policy held in memory. `file` only names it in errors.
 * Every problem is reported, not just the first, each with its line and column.
 */
export function parsePolicy(source: string, file: string): PolicyLoadResult {
  const result = parseUnredacted(source, file);
  // Messages quote what the file says (a key, an alias, a tag): never a key, wherever they are shown.
  return result.ok ? result : { ok: false, errors: result.errors.map((e) => ({ ...e, message: redactKeysAndBodies(e.message) })) };
}

function parseUnredacted(source: string, file: string): PolicyLoadResult {
  const read = readPolicyYaml(source, file);
  if (!read.ok) return read;
  const { doc, data, at } = read;
  const parsed = policySchema.safeParse(data);
  if (!parsed.success) {
    return {
      ok: false,
      // One line for each unknown field: zod names every one of a mapping's in one issue.
      errors: parsed.error.issues.flatMap(meantBranch).flatMap((issue: z.core.$ZodIssue) => {
        if (issue.code === 'unrecognized_keys') {
          return issue.keys.map((key) => at(offsetOf(doc, issue.path, key), `${describePath([...issue.path, key])}unknown field "${key}"`));
        }
        return [at(offsetOf(doc, issue.path), describeIssue(issue, data))];
      }),
    };
  }

  const contentHash = createHash('sha256').update(source).digest('hex');
  let compiled: ReturnType<typeof compilePolicy>;
  try {
    compiled = compilePolicy(parsed.data, contentHash);
  } catch (err) {
    // A fault of ours, not of the file's that a check names: refused all the same, never a crash
    // (a running gateway keeps its policy).
    return { ok: false, errors: [at(0, `the policy could not be compiled: ${(err as Error).message}`)] };
  }
  if (!compiled.ok) {
    return {
      ok: false,
      errors: compiled.problems.map((p) => at(offsetOf(doc, p.path), `${describePath(p.path)}${p.message}`)),
    };
  }
  return { ok: true, policy: compiled.policy, source };
}

/**
 * The largest policy file read. Loading runs on the gateway's only JavaScript thread and serves no
 * request meanwhile: 256 KiB is seventy times the shipped policy, and a file of megabytes written
 * there by mistake (15 MB of permissions parsed for 6.7 s, and held 1.1 GB) stalls nothing. What
 * a file within the limit costs depends on its routes' shapes, not its size (compile.ts).
 */
export const MAX_POLICY_BYTES = 256 * 1024;

/**
 * Reads and validates a policy file. `pipeWaitMs` bounds how long a named pipe may hold the read
 * (a reload: the running gateway's next reload must not wait on a pipe nobody writes); without it a
 * pipe is read for as long as it stays open.
 */
export async function loadPolicy(file: string, { pipeWaitMs }: { pipeWaitMs?: number } = {}): Promise<PolicyLoadResult> {
  const refused = (message: string): PolicyLoadResult => ({ ok: false, errors: [{ file, line: 0, column: 0, message }] });
  let source: string;
  try {
    // A pipe (`policy diff <(git show …) NEW`) has no size to ask for: read up to one byte past the limit.
    const read = await readAtMost(file, MAX_POLICY_BYTES, { pipeWaitMs });
    if (read.over) {
      return refused(read.size === undefined ? `policy file too large: more than ${MAX_POLICY_BYTES} bytes` : `policy file too large: ${read.size} bytes, at most ${MAX_POLICY_BYTES}`);
    }
    const text = read.bytes;
    if (!isUtf8(text)) {
      // Decoded anyway, a byte that is no UTF-8 would become U+FFFD: another text than the file's.
      // The first line that is not UTF-8 on its own (a newline byte is never inside a character).
      let line = 1;
      for (let start = 0; start <= text.length; line++) {
        const end = text.indexOf(0x0a, start);
        if (!isUtf8(text.subarray(start, end === -1 ? text.length : end))) break;
        start = end === -1 ? text.length + 1 : end + 1;
      }
      return { ok: false, errors: [{ file, line, column: 0, message: 'not UTF-8 text: a policy file is UTF-8' }] };
    }
    source = text.toString('utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'a directory, not a file' : (err as Error).message;
    return refused(`cannot read policy: ${reason}`);
  }
  return parsePolicy(source, file);
}

export async function loadPolicyOrThrow(file: string): Promise<LoadedPolicy> {
  const result = await loadPolicy(file);
  if (!result.ok) throw new PolicyLoadError(result.errors);
  return result;
}

/**
 * A value that fits neither form of a field that has two (`query`: a mapping, or `any`), as the form
 * it was meant as reports it: a mapping with one bad type is told which, not that it is not `any`.
 * Meant: the only form whose complaints are about the value's insides, not its kind. A value of
 * neither kind gets the field's own message.
 */
function meantBranch(issue: z.core.$ZodIssue): z.core.$ZodIssue[] {
  if (issue.code !== 'invalid_union') return [issue];
  const ofKind = (i: z.core.$ZodIssue) => i.path.length === 0 && (i.code === 'invalid_type' || i.code === 'invalid_value');
  const meant = issue.errors.filter((branch) => !branch.every(ofKind));
  if (meant.length !== 1) return [issue];
  return meant[0]!.flatMap((i) => meantBranch({ ...i, path: [...issue.path, ...i.path] } as z.core.$ZodIssue));
}
