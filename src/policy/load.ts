import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, visit, type Document, type ParsedNode } from 'yaml';
import type { z } from 'zod';
import { holdsKey, redactKeysAndBodies } from '../secrets/redact.js';
import { compilePolicy, type CompiledPolicy } from './compile.js';
import { policySchema } from './schema.js';
import { readAtMost } from './read-at-most.js';

/** One reason a policy was refused, located in its file. */
export interface PolicyError {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly message: string;
}

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

type DocPath = readonly PropertyKey[];

/** The child of a YAML collection under `key`, matching map keys by their printed form (YAML keys may be numbers). */
function child(node: unknown, key: PropertyKey): { key: unknown; value: unknown } | undefined {
  if (isMap(node)) {
    const pair = node.items.find((item) => isScalar(item.key) && String(item.key.value) === String(key));
    return pair ? { key: pair.key, value: pair.value } : undefined;
  }
  if (isSeq(node) && typeof key === 'number') {
    const value = node.items[key];
    return value === undefined ? undefined : { key: value, value };
  }
  return undefined;
}

/**
 * Source offset for a problem at `path`: the value's node, or the key's node when `atKey` is set
 * (an unknown field), or else the nearest ancestor that exists (a missing field).
 */
function offsetOf(doc: Document, path: DocPath, atKey?: string): number {
  let node: unknown = doc.contents;
  let offset = isNode(node) && node.range ? node.range[0] : 0;
  for (const key of atKey === undefined ? path : [...path, atKey]) {
    const next = child(node, key);
    if (!next) break;
    const located = key === atKey && isNode(next.key) ? next.key : next.value;
    if (isNode(located) && located.range) offset = located.range[0];
    node = next.value;
  }
  return offset;
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
 * Two map keys are one when they print alike: the document becomes plain data in which `403` and
 * `"403"` are the same field, and a later one would silently replace the earlier (an upstream 403
 * then answered as 403, not 404). YAML itself holds them distinct.
 */
const sameKey = (a: ParsedNode, b: ParsedNode): boolean => a === b || (isScalar(a) && isScalar(b) && String(a.value) === String(b.value));

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
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false, uniqueKeys: sameKey });
  const at = (offset: number, message: string): PolicyError => {
    const { line, col } = lineCounter.linePos(offset);
    return { file, line, column: col, message };
  };

  // A warning is a file read otherwise than written (an unknown %YAML version read as 1.2, say): refused like an error.
  const problems = [...doc.errors, ...doc.warnings];
  if (problems.length > 0) {
    return { ok: false, errors: problems.map((e) => at(e.pos[0], `invalid YAML: ${e.message.split('\n')[0]}`)) };
  }
  // YAML 1.1 reads `on` as true, `0770` as 504 and `<<` as a merge: the policy would mean other than it says.
  if (doc.directives?.yaml.explicit === true && doc.directives.yaml.version !== '1.2') {
    return { ok: false, errors: [at(0, `YAML ${doc.directives.yaml.version} is not read: a policy is YAML 1.2 (leave the %YAML directive out)`)] };
  }
  // A policy is read as it is written: one place for each value, nothing that expands, and every key
  // the text it shows (the status map's, whole numbers).
  const statusMap = doc.get('upstream_status_map', true);
  const unread: PolicyError[] = [];
  // `!!omap`, `!!set`, `!!binary` …: values of other kinds than the policy's, read as other than
  // written; `!!str`, `!!int` on a single value make the text mean what it does not show.
  const refuseTag = (node: { tag?: string | undefined; range?: [number, number, number] | null | undefined }) => {
    if (node.tag !== undefined) unread.push(at(node.range?.[0] ?? 0, `YAML tags are not allowed (${node.tag}): write the value plainly`));
  };
  visit(doc, {
    Alias(_, alias) {
      unread.push(at(alias.range?.[0] ?? 0, `YAML aliases are not allowed (*${alias.source}): write the value out`));
    },
    // Mappings and sequences (the library gives a single value to `Scalar` instead).
    Node(_, node) {
      refuseTag(node);
    },
    // A policy names routes and permissions; a key in it (a description, a path) would be served in
    // the catalogue, printed by `policy` and logged.
    Scalar(_, node) {
      refuseTag(node);
      if (typeof node.value === 'string' && holdsKey(node.value)) {
        unread.push(at(node.range?.[0] ?? 0, 'this holds what is shaped like an API key or its random part: a policy holds none'));
      }
    },
    Pair(_, pair, ancestors) {
      const key = pair.key;
      if (!isScalar(key)) return void unread.push(at(isNode(key) && key.range ? key.range[0] : 0, 'a key must be plain text'));
      const offset = key.range?.[0] ?? 0;
      if (ancestors.at(-1) === statusMap) {
        // A status as written, plain (`403`) or quoted (`"403"`, as JSON writes every key); not `0x193` or `403.0`.
        const written = typeof key.value === 'string' ? key.value : String(key.source);
        if (!/^[0-9]+$/.test(written) || (typeof key.value !== 'string' && written !== String(key.value))) {
          unread.push(at(offset, `${String(key.source)}: a status map key is a status code written in decimal digits`));
        }
        return;
      }
      if (typeof key.value !== 'string') {
        unread.push(at(offset, `the key ${String(key.source)} is read as ${key.value === null ? 'null' : typeof key.value === 'number' ? 'a number' : `a ${typeof key.value}`}, not as text: quote it ("${String(key.source)}")`));
      } else if (key.value === '__proto__') {
        unread.push(at(offset, 'a key named __proto__ is not allowed'));
      }
    },
  });
  if (unread.length > 0) return { ok: false, errors: unread };

  const value: unknown = doc.toJS({ maxAliasCount: 0 });
  // zod would say "expected object, received null": true, and no help to whoever wrote the file.
  if (value === null || value === undefined) return { ok: false, errors: [at(0, 'no policy in the file: it is empty, or holds only comments')] };
  const data = ownStrings(value);
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
 * The parsed document with every string copied out of the source text. The YAML parser's strings
 * are slices of the source, and a source with one character beyond Latin-1 (the shipped policy's
 * "…" in a comment) is stored two bytes a character: so then is every slice, and every access line
 * that holds a route id, which V8 then encodes to UTF-8 the slow way (12k instructions a request,
 * bench/RESULTS.md, fifteenth session). A copy is one byte a character when it can be, and no longer
 * holds the whole source in memory.
 */
function ownStrings(value: unknown): unknown {
  if (typeof value === 'string') return JSON.parse(JSON.stringify(value)) as string;
  if (Array.isArray(value)) return value.map(ownStrings);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [ownStrings(key) as string, ownStrings(item)]));
  }
  return value;
}

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
