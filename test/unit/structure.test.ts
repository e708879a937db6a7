import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * The shape of src/ that keeps the house easy to see and to change: rooms (folders) that import
 * downward only, with no cycle between them; small files and functions; and every workaround of
 * Node's internals in its own module, with a canary test.
 */
const SRC = path.resolve('src');

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    return entry.isDirectory() ? sourceFiles(file) : file.endsWith('.ts') ? [file] : [];
  });
}

const rel = (file: string) => path.relative(SRC, file);
/** A file's room: the folder under src/ it is in, or the file itself at the root. */
const roomOf = (file: string) => (rel(file).includes('/') ? rel(file).split('/')[0]! : rel(file));

/** Every relative import of a file (static, dynamic and type-only), as the file it names. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+)'(\.{1,2}\/[^']+)'/g)]
    .map((m) => path.resolve(path.dirname(file), m[1]!).replace(/\.js$/, '.ts'))
    .filter((target) => target.startsWith(SRC + path.sep));
}

const files = sourceFiles();

describe('the layout of src/', () => {
  it('keeps at most four loose files at its root: the entry points', () => {
    expect(files.filter((f) => !rel(f).includes('/')).map(rel).sort()).toEqual(['cli.ts', 'gateway.ts']);
  });

  it('has no file of more than about 300 lines', () => {
    const long = files.map((f) => [rel(f), readFileSync(f, 'utf8').split('\n').length] as const).filter(([, lines]) => lines > 310);
    expect(long).toEqual([]);
  });

  it('has no function of more than about 80 lines', () => {
    const long: string[] = [];
    for (const file of files) {
      const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
      const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
          const lines = source.getLineAndCharacterOfPosition(node.end).line - source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
          if (lines > 85) long.push(`${rel(file)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1} (${lines} lines)`);
        }
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    expect(long).toEqual([]);
  });
});

describe('imports', () => {
  const edges = new Map<string, Map<string, string[]>>();
  for (const file of files) {
    for (const target of importsOf(file)) {
      const [from, to] = [roomOf(file), roomOf(target)];
      if (from === to) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      edges.get(from)!.set(to, [...(edges.get(from)!.get(to) ?? []), `${rel(file)} → ${rel(target)}`]);
    }
  }
  const importers = (room: string) => [...edges].filter(([, to]) => to.has(room)).map(([from]) => from);

  it('form no cycle between rooms: each room imports only rooms below it', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const walk = (room: string): void => {
      state.set(room, 'open');
      stack.push(room);
      for (const next of edges.get(room)?.keys() ?? []) {
        if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next].join(' → '));
        else if (state.get(next) === undefined) walk(next);
      }
      stack.pop();
      state.set(room, 'done');
    };
    for (const room of edges.keys()) if (!state.has(room)) walk(room);
    expect(cycles).toEqual([]);
  });

  /** The rooms from the top down, as README.md lists them: each imports only rooms below it (one row may share). */
  const LAYERS = [['cli.ts', 'cli'], ['demo'], ['cluster'], ['gateway.ts'], ['http'], ['admin'], ['app'], ['plugins'], ['proxy'], ['limits'], ['keys'], ['policy'], ['lifecycle'], ['observability'], ['errors'], ['config'], ['secrets', 'net'], ['node-internals']];
  const layerOf = (room: string) => LAYERS.findIndex((rooms) => rooms.includes(room));

  it('run downward only, in the order README.md gives the rooms', () => {
    expect(files.map(roomOf).filter((room) => layerOf(room) === -1)).toEqual([]);
    const upward = [...edges].flatMap(([from, to]) => [...to].filter(([target]) => layerOf(target) < layerOf(from)).flatMap(([, via]) => via));
    expect(upward).toEqual([]);
  });

  it('keep the defaults free of the rest: config/defaults.ts imports nothing', () => {
    expect(importsOf(path.join(SRC, 'config/defaults.ts'))).toEqual([]);
  });

  it.each([
    ['policy', ['proxy', 'plugins', 'app', 'http', 'keys', 'cluster', 'cli']],
    ['config', ['keys', 'proxy', 'plugins', 'policy']],
    ['plugins', ['app', 'http', 'cluster', 'cli', 'gateway.ts']],
    ['proxy', ['app', 'plugins', 'http', 'cluster', 'cli', 'keys', 'policy']],
    ['keys', ['proxy', 'plugins', 'app', 'http', 'cluster', 'cli', 'policy']],
  ])('%s/ imports nothing of %j', (room, forbidden) => {
    const reached = [...(edges.get(room)?.entries() ?? [])].filter(([to]) => forbidden.includes(to)).flatMap(([, via]) => via);
    expect(reached).toEqual([]);
  });

  it('of the plugins, take configuration as options, not from the environment schema', () => {
    const fromSchema = files.filter((f) => roomOf(f) === 'plugins').flatMap((f) => importsOf(f).filter((t) => /config\/(env|load-config)\.ts$/.test(t)).map((t) => `${rel(f)} → ${rel(t)}`));
    expect(fromSchema).toEqual([]);
  });

  it('of the command line, before a command is known, load nothing heavy (every command starts with them)', () => {
    const loaded = new Set<string>();
    const load = (file: string): void => {
      const text = readFileSync(file, 'utf8');
      // Static imports only: each command's modules are imported when it runs.
      for (const m of text.matchAll(/^import (?!type)[^;]*?from '(\.{1,2}\/[^']+)'/gm)) {
        const target = path.resolve(path.dirname(file), m[1]!).replace(/\.js$/, '.ts');
        if (!loaded.has(target)) {
          loaded.add(target);
          load(target);
        }
      }
    };
    // cli.ts loads cli/main.ts only after the Node.js version check, by a dynamic import.
    expect(readFileSync(path.join(SRC, 'cli.ts'), 'utf8')).toMatch(/^import '\.\.\/scripts\/require-node\.mjs';\n\nawait import\('\.\/cli\/main\.js'\);$/m);
    load(path.join(SRC, 'cli/main.ts'));
    expect([...loaded].map(rel).sort()).toEqual(['cli/command-line.ts', 'lifecycle/signals.ts', 'net/percent-decoding.ts', 'secrets/redact.ts']);
    expect(importers('cli')).toEqual(['cli.ts']);
  });
});

describe('workarounds of Node internals', () => {
  const internals = files.filter((f) => roomOf(f) === 'node-internals');

  it.each(internals.map((f) => [rel(f), f]))('%s says what it relies on, and names its canary test, which exists', (_name, file) => {
    const header = readFileSync(file, 'utf8').split('*/')[0]!;
    expect(header).toMatch(/Relies on \(undocumented[^)]*\):/);
    const canary = /Canary: (test\/[^\s]+\.test\.ts)/.exec(header)?.[1];
    expect(canary).toBe(`test/unit/node-internals/${path.basename(file, '.ts')}.test.ts`);
    expect(existsSync(canary!)).toBe(true);
  });

  it('are the only code that reaches into Node internals', () => {
    const reaching = files
      .filter((f) => roomOf(f) !== 'node-internals')
      .filter((f) => /\._httpMessage|\.shouldKeepAlive\s*=|\.chunkedEncoding|exitedAfterDisconnect\s*=|\baddRequest\b|globalThis\.gc\b/.test(readFileSync(f, 'utf8')))
      .map(rel);
    expect(reaching).toEqual([]);
  });
});
