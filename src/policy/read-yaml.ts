/**
 * @module
 * A policy's YAML, read as it is written or not at all: YAML 1.2 only, no aliases, no tags, every
 * key the text it shows. Every problem is located by line and column (offsetOf).
 */
import { isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, visit, type Document, type ParsedNode } from 'yaml';
import { holdsKey } from '../secrets/redact.js';

/** One reason a policy was refused, located in its file. */
export interface PolicyError {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly message: string;
}

export type DocPath = readonly PropertyKey[];

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
export function offsetOf(doc: Document, path: DocPath, atKey?: string): number {
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

/**
 * Two map keys are one when they print alike: the document becomes plain data in which `403` and
 * `"403"` are the same field, and a later one would silently replace the earlier (an upstream 403
 * then answered as 403, not 404). YAML itself holds them distinct.
 */
const sameKey = (a: ParsedNode, b: ParsedNode): boolean => a === b || (isScalar(a) && isScalar(b) && String(a.value) === String(b.value));


/** The document and its plain data, with `at` to locate a problem; or why it cannot be read. */
export type ReadYaml =
  | { readonly ok: true; readonly doc: Document; readonly data: unknown; readonly at: (offset: number, message: string) => PolicyError }
  | { readonly ok: false; readonly errors: PolicyError[] };

export function readPolicyYaml(source: string, file: string): ReadYaml {
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
  const unread = unreadAsWritten(doc, at);
  if (unread.length > 0) return { ok: false, errors: unread };

  const value: unknown = doc.toJS({ maxAliasCount: 0 });
  // zod would say "expected object, received null": true, and no help to whoever wrote the file.
  if (value === null || value === undefined) return { ok: false, errors: [at(0, 'no policy in the file: it is empty, or holds only comments')] };
  return { ok: true, doc, data: ownStrings(value), at };
}

/**
 * A policy is read as it is written: one place for each value, nothing that expands, and every key
 * the text it shows (the status map's, whole numbers). What is not, located.
 */
function unreadAsWritten(doc: Document, at: (offset: number, message: string) => PolicyError): PolicyError[] {
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
  return unread;
}

/**
 * The parsed document with every string copied out of the source text. The parser's strings are
 * slices of the source, two bytes a character when the source holds one character beyond Latin-1,
 * and so then is every access line holding a route id (encoded the slow way). A copy is one byte a
 * character when it can be, and no longer holds the whole source in memory.
 */
function ownStrings(value: unknown): unknown {
  if (typeof value === 'string') return JSON.parse(JSON.stringify(value)) as string;
  if (Array.isArray(value)) return value.map(ownStrings);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [ownStrings(key) as string, ownStrings(item)]));
  }
  return value;
}

