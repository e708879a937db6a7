/**
 * @module
 * The policy's field reference in docs/policy.md, rendered from the schema's own descriptions
 * (schema.ts) and the parameter types (param-types.ts): `npm run docs` writes it between its markers,
 * and a test fails when the page is not what this renders.
 */
import type { z } from 'zod';
import { PARAM_TYPES } from './param-types.js';
import { permissionSchema, policySchema, routeSchema } from './schema.js';

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
    '### Parameter types (`params` and `query`)',
    '',
    '| type | a value is |',
    '|---|---|',
    ...types,
  ].join('\n');
}
