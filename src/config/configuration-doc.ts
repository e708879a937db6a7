/**
 * @module
 * docs/configuration.md, rendered from the settings' schema (env.ts): `npm run docs` writes it, and a
 * test fails when the file is not what this renders. Also how a generated section of a hand-written
 * page is replaced: between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`.
 */
import { CONFIG_FIELDS } from './env.js';
import { flagName } from './load-config.js';
import { RETIRED_SETTINGS } from './retired-settings.js';

/** Pipes and line breaks would end a Markdown table's cell. */
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

export function renderConfigurationDoc(): string {
  const rows = Object.values(CONFIG_FIELDS).map((spec) => {
    const fallback = spec.default === undefined ? 'none: required' : spec.default === '' ? 'empty' : `\`${spec.default}\``;
    return `| \`${spec.env}\` | \`--${flagName(spec.env)}\` | ${fallback} | ${cell(spec.description)} |`;
  });
  const retired = Object.entries(RETIRED_SETTINGS).map(([env, instead]) => `- \`${env}\`: ${instead}.`);
  return `# Configuration

Every setting of \`acquirer-gateway serve\` comes from an environment variable, or from the flag of
the same name, which wins (\`PORT\` → \`--port\`, \`UPSTREAM_URL\` → \`--upstream-url\`).
\`acquirer-gateway serve --help\` lists them one line each. Each is checked once, at start-up: an
invalid value stops it with one line naming the variable and what is allowed, exit code 2
(\`HEADERS_TIMEOUT_MS: must be an integer from 1000 to 600000 (got "10")\`). Two are checked
against each other: \`HEADERS_TIMEOUT_MS\` may not be longer than \`REQUEST_TIMEOUT_MS\`, and
\`ACQUIRER_MAX_IN_FLIGHT\` not more than \`UPSTREAM_MAX_SOCKETS\`.

The \`keys\` commands read the Redis settings (\`REDIS_URL\` or the Sentinel or Cluster ones, the
credentials and TLS, \`REDIS_KEY_PREFIX\`) and \`POLICY_FILE\`, and the \`policy\` commands
\`POLICY_FILE\`, checked as \`serve\` checks them.

This page is generated from \`src/config/env.ts\` by \`npm run docs\`: change a description there.

| variable | flag | default | meaning |
|---|---|---|---|
${rows.join('\n')}

## Retired settings

Set, they are ignored, and \`serve\` logs \`setting_retired\` at start-up naming each:

${retired.join('\n')}
`;
}

/** `page` with the section NAME replaced by `content`; throws when the page has no such section. */
export function replaceGenerated(page: string, name: string, content: string): string {
  const start = `<!-- generated: ${name} -->`;
  const end = `<!-- end generated: ${name} -->`;
  const from = page.indexOf(start);
  const to = page.indexOf(end);
  if (from === -1 || to < from) throw new Error(`no section "${name}" (${start} … ${end})`);
  return `${page.slice(0, from + start.length)}\n${content}\n${page.slice(to)}`;
}
