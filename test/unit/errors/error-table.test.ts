import { readFileSync } from 'node:fs';
import { ERROR_CODES, STATUS_MESSAGES } from '../../../src/errors/codes.js';
import { errorBody } from '../../../src/errors/error-response.js';

/** Rows of docs/api.md's "Errors" table: | `CODE` | status | `body` | … */
function documentedErrorRows(): Map<string, { status: number; body: string }> {
  const page = readFileSync('docs/api.md', 'utf8');
  const section = page.split('\n## ').find((s) => s.startsWith('Errors'));
  if (!section) throw new Error('docs/api.md has no "## Errors" section');
  const rows = new Map<string, { status: number; body: string }>();
  for (const match of section.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \| `(\{.*?\})` \|/gm)) {
    rows.set(match[1]!, { status: Number(match[2]), body: match[3]! });
  }
  return rows;
}

describe('the error table', () => {
  it('has the documented bodies, byte for byte', () => {
    expect(errorBody(401).toString()).toBe('{"message":"Invalid authentication information"}');
    expect(errorBody(403).toString()).toBe('{"message":"Unauthorized"}');
    expect(errorBody(404).toString()).toBe('{"message":"Not found"}');
    expect(errorBody(502).toString()).toBe('{"message":"Bad gateway"}');
    expect(errorBody(503).toString()).toBe('{"message":"Service unavailable"}');
    expect(errorBody(504).toString()).toBe('{"message":"Gateway timeout"}');
  });

  it('matches docs/api.md in both directions', () => {
    const rows = documentedErrorRows();
    const fromCode = new Map(
      Object.entries(ERROR_CODES).map(([code, def]) => [code, { status: def.status, body: JSON.stringify({ message: STATUS_MESSAGES[def.status] }) }]),
    );
    expect(Object.fromEntries(rows)).toEqual(Object.fromEntries(fromCode));
  });
});
