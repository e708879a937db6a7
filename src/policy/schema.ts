import { z } from 'zod';
import { PARAM_TYPE_NAMES } from './param-types.js';

/**
 * The policy file's shape. Field descriptions here are docs/policy.md's reference (`npm run docs`).
 * Objects are strict: an unknown field is an error, never silently ignored.
 */
const permissionName = z
  .string()
  .regex(/^[a-z0-9]+(?:_[a-z0-9]+)+$/, 'must be of the form <group>_<action> (lower case, digits, underscores)');

export const permissionSchema = z.strictObject({
  name: permissionName.describe('Permission name, <group>_<action>.'),
  description: z.string().min(1).describe('What the permission grants; served by the permission catalogue route.'),
});

export const SERVED_BY_GATEWAY = ['permission_catalogue'] as const;
export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * A route's `query` that forwards whatever query comes: spelled out, never the default, since an
 * upstream that reads its query could be told an `acquirer_id` of the client's choosing.
 */
export const UNCHECKED_QUERY = 'any';

export const routeSchema = z.strictObject({
  id: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be lower case letters, digits and underscores, starting with a letter')
    .describe('Stable identifier; used in metrics and logs.'),
  method: z.enum(HTTP_METHODS).describe('HTTP method, upper case. HEAD and OPTIONS are never implied.'),
  path: z.string().describe('Path template: literal segments and at most one :name parameter per segment.'),
  params: z
    .record(z.string(), z.enum(PARAM_TYPE_NAMES))
    .optional()
    .describe('Type of each :name parameter of the path.'),
  query: z
    .union([z.literal(UNCHECKED_QUERY), z.record(z.string(), z.enum(PARAM_TYPE_NAMES))], {
      error: `the query parameters the route takes, each with its type (\`{ page: positive_integer }\`), \`{}\` for none, or \`${UNCHECKED_QUERY}\``,
    })
    .optional()
    .describe(
      `The query parameters the route takes, each with its type: any other, one given twice, or a value not of its type is refused (400). Absent or \`{}\`: none (absent on a \`serve\` route: any, unread). \`${UNCHECKED_QUERY}\`: the query is forwarded unchecked, which a route must ask for.`,
    ),
  permissions: z
    .array(permissionName)
    .describe('Permissions the key must carry, all of them. Empty: any valid key.'),
  serve: z
    .enum(SERVED_BY_GATEWAY)
    .optional()
    .describe('Answered by the gateway itself instead of the upstream.'),
});

export const policySchema = z.strictObject({
  version: z.literal(1).describe('Policy format version.'),
  acquirer_header: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9-]*$/, 'must be an HTTP header name of letters, digits and hyphens')
    .describe('Header that carries the acquirer id upstream.'),
  upstream_status_map: z
    // Which keys are statuses is checked in compile.ts: a key zod refuses loses its reason ("Invalid key in record").
    .record(z.string(), z.number().int())
    // Without one, an upstream 403 (another acquirer's) answers as a 404 (none), as the API document requires.
    .default({ '403': 404, '404': 404 })
    .describe('Upstream status → status the gateway answers with (documented body); default 403 → 404, 404 → 404. An upstream 403 and 404 must answer alike; nothing maps to 401, and an upstream 401 is 502 (listed or not, never anything else).'),
  permissions: z.array(permissionSchema).min(1).describe('The permission catalogue.'),
  routes: z.array(routeSchema).min(1).describe('The routes; anything else is 404.'),
});

export type PolicyDocument = z.infer<typeof policySchema>;
