import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { renderConfigurationDoc } from '../../src/config/configuration-doc.js';
import { renderLogEvents } from '../../src/observability/logger/log-events.js';
import { createMetrics, createPrimaryMetrics } from '../../src/observability/metrics/metrics.js';
import { shippedPolicy } from '../helpers/policy.js';
import { renderPolicyFields, renderShippedRoutes } from '../../src/policy/policy-doc.js';

/**
 * The README and docs/ stay true to the code: what follows from it is generated (`npm run docs`)
 * and checked here, the metric table names what the gateway exports, links lead somewhere, and the
 * README stays a guide a newcomer reads in minutes.
 */
const read = (file: string) => readFileSync(file, 'utf8');

/** The text between a page's markers for one generated section. */
function generated(page: string, name: string): string {
  const text = read(page);
  const start = text.indexOf(`<!-- generated: ${name} -->`);
  const end = text.indexOf(`<!-- end generated: ${name} -->`);
  if (start === -1 || end === -1) throw new Error(`${page} has no generated section "${name}"`);
  return text.slice(start + `<!-- generated: ${name} -->`.length, end).trim();
}

describe('the generated reference (npm run docs writes it: run it when a test here fails)', () => {
  it('docs/configuration.md is the settings schema', () => {
    expect(read('docs/configuration.md')).toBe(renderConfigurationDoc());
  });

  it("docs/policy.md's field reference is the policy schema", () => {
    expect(generated('docs/policy.md', 'policy-fields')).toBe(renderPolicyFields());
  });

  it("docs/policy.md's table of the shipped routes is the shipped policy", async () => {
    expect(generated('docs/policy.md', 'shipped-routes')).toBe(renderShippedRoutes(await shippedPolicy()));
  });

  it("docs/operations.md's list of log events is the catalogue", () => {
    expect(generated('docs/operations.md', 'log-events')).toBe(renderLogEvents());
  });
});

describe('docs/policy.md', () => {
  it('its example is a policy the gateway loads', async () => {
    const { parsePolicy } = await import('../../src/policy/load.js');
    const example = /```yaml\n([\s\S]*?)```/.exec(read('docs/policy.md'))![1]!;
    const result = parsePolicy(example, 'docs/policy.md');
    expect(result.ok ? [] : result.errors).toEqual([]);
  });
});

describe('docs/operations.md, metrics', () => {
  it('lists every metric the gateway exports, and no other', async () => {
    const own = (await createMetrics({ shadow: true }).registry.getMetricsAsJSON()).map((m) => m.name).filter((name) => !/_(process|nodejs)_/.test(name));
    const primary = (await createPrimaryMetrics().collect()).map((m) => m.name).filter((name) => !name.includes('_primary_process_'));
    const exported = [...new Set([...own, ...primary])].sort();
    const table = read('docs/operations.md').split('\n## Metrics')[1]!.split('\n## ')[0]!;
    const documented = [...table.matchAll(/^\| `(acquirer_gateway_[a-z_]+)` \|/gm)].map((m) => m[1]!).sort();
    expect(documented).toEqual(exported);
  });
});

describe('the README and docs/', () => {
  const pages = ['README.md', ...execFileSync('git', ['ls-files', 'docs'], { encoding: 'utf8' }).split('\n').filter((f) => f.endsWith('.md')), 'bench/README.md'];

  it('README.md is a guide: at most 250 lines', () => {
    expect(read('README.md').split('\n').length).toBeLessThanOrEqual(250);
  });

  it.each(pages)('%s links only to files and headings that exist in the repository', (page) => {
    const broken: string[] = [];
    const slug = (heading: string) => heading.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    for (const [, target] of read(page).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) {
        broken.push(`${target} (leaves the repository)`);
        continue;
      }
      const [file, anchor] = target!.split('#') as [string, string | undefined];
      const resolved = file === '' ? page : path.join(path.dirname(page), file);
      if (!existsSync(resolved)) broken.push(`${target} (no file)`);
      else if (anchor !== undefined && resolved.endsWith('.md')) {
        const headings = [...read(resolved).matchAll(/^#+ (.*)$/gm)].map((m) => slug(m[1]!));
        if (!headings.includes(anchor)) broken.push(`${target} (no heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('every pointer from src/ or bench/ to docs/ names a page, and a heading of it when it quotes one', () => {
    const files = execFileSync('git', ['ls-files', 'src', 'bench', 'scripts'], { encoding: 'utf8' }).split('\n').filter((f) => /\.(ts|mjs)$/.test(f));
    const broken: string[] = [];
    for (const file of files) {
      for (const [pointer, page, section] of read(file).matchAll(/docs\/([a-z-]+\.md)(?:, "([^"]+)")?/g)) {
        if (!existsSync(`docs/${page}`)) broken.push(`${file}: ${pointer} (no page)`);
        else if (section !== undefined && !read(`docs/${page}`).split('\n').some((line) => line.startsWith('#') && line.includes(section))) {
          broken.push(`${file}: ${pointer} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('nothing tracked speaks of the work sessions that built it, or of a diary of them', () => {
    const files = execFileSync('git', ['ls-files'], { encoding: 'utf8' }).split('\n').filter((f) => /\.(md|ts|mjs|js|yaml|yml|json)$/.test(f) && !f.endsWith('package-lock.json'));
    // An ordinal or a pointer before "session": a work session, not a cookie's or an inspector's.
    const diary = /\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\w*teenth|\w*tieth|\d+(?:st|nd|rd|th)|this|that|same|previous|next|earlier|later) sessions?\b|RESULTS\.md/i;
    const mentions = files.flatMap((f) => (diary.test(read(f)) && !f.endsWith('docs.test.ts') ? [f] : []));
    expect(mentions).toEqual([]);
  });

  it('nothing tracked points at a file outside the repository', () => {
    const files = execFileSync('git', ['ls-files'], { encoding: 'utf8' }).split('\n').filter((f) => /\.(md|ts|mjs|js|yaml|yml|json)$/.test(f) && !f.endsWith('package-lock.json'));
    const outside = files.flatMap((f) => (/\.\.\/shared\//.test(read(f)) && !f.endsWith('docs.test.ts') ? [f] : []));
    expect(outside).toEqual([]);
  });
});
