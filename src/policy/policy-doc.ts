/**
 * @module
 * The policy's field reference in docs/policy.md, rendered from the schema's own descriptions
 * (schema.ts) and the parameter types (param-types.ts): `npm run docs` writes it between its markers,
 * and a test fails when the page is not what this renders.
 */
import type { z } from 'zod';
import type { CompiledPolicy } from './compile.js';
import { routeTable } from './diff.js';
import { PARAM_TYPES } from './param-types.js';
import { bodySchema, permissionSchema, policySchema, routeSchema } from './schema.js';
import { ALPHABETS } from './value-types.js';

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** Whether a field may be left out (optional, or with a default). */
function optional(schema: z.ZodType): boolean {
  return schema.safeParse(undefined).success;
}

function table(prefix: string, shape: Record<string, z.ZodType>): string {
  const rows = Object.entries(shape).map(([name, schema]) => `| \`${prefix}${name}\` | ${optional(schema) ? 'optional' : 'required'} | ${cell(schema.description ?? '')} |`);
  return ['| field | | meaning |', '|---|---|---|', ...rows].join('\n');
}

export function renderPolicyFields(): string {
  const types = Object.entries(PARAM_TYPES).map(([name, type]) => `| \`${name}\` | ${cell(type.description)} |`);
  const alphabets = Object.entries(ALPHABETS).map(([name, alphabet]) => `\`${name}\` (${alphabet.description})`);
  return [
    '### The document',
    '',
    table('', policySchema.shape),
    '',
    '### Each permission (`permissions[]`)',
    '',
    table('', permissionSchema.shape),
    '',
    '### Each route (`routes[]`)',
    '',
    table('', routeSchema.shape),
    '',
    '### A route\'s body (`routes[].body`)',
    '',
    table('', bodySchema.shape),
    '',
    '### Parameter types (`params` and `query`)',
    '',
    'A parameter is given a type by name, or by an object that bounds one:',
    '',
    '| type | a value is |',
    '|---|---|',
    ...types,
    '| `{ type: integer, min, max }` | an `integer` (or `positive_integer`) within the bounds, either optional |',
    '| `{ type: enum, values: [...] }` | exactly one of the values (1 to 64 of A-Z a-z 0-9 _ . : -) |',
    `| \`{ type: string, alphabet, max_length }\` | 1 to max_length characters of the alphabet: ${alphabets.join(', ')} |`,
    '',
    'A query parameter\'s object may add `max_count: N` (2 to 100): the parameter may be given up to N times (`status[]`).',
  ].join('\n');
}

/** The shipped policy's routes for docs/policy.md: `policy routes`' table, without the file's hash. */
export function renderShippedRoutes(policy: CompiledPolicy): string {
  return routeTable(policy).split('\n').slice(1).join('\n').trim();
}
