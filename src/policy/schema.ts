import { z } from 'zod';
import { PARAM_TYPE_NAMES } from './param-types.js';
import { ALPHABETS, type AlphabetName } from './value-types.js';

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
export const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Largest `max_bytes` a route may declare: a body is held whole while it is checked. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

const bound = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const maxCount = { max_count: z.number().int().min(2).max(100).optional().describe('A query parameter given up to this many times (`status[]`); absent: once.') };
const ALPHABET_NAMES = Object.keys(ALPHABETS) as [AlphabetName, ...AlphabetName[]];

/** What a path or query parameter takes: a type's name, or an object that bounds one (docs/policy.md). */
const valueSpec = z.union(
  [
    z.enum(PARAM_TYPE_NAMES),
    z.discriminatedUnion('type', [
      z.strictObject({
        type: z.literal('enum'),
        values: z
          .array(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'an enumeration value is 1 to 64 of A-Z a-z 0-9 _ . : -'))
          .min(1)
          .max(64)
          .refine((values) => new Set(values).size === values.length, 'values are listed once each'),
        ...maxCount,
      }),
      z.strictObject({ type: z.literal('string'), alphabet: z.enum(ALPHABET_NAMES), max_length: z.number().int().min(1).max(1024), ...maxCount }),
      z
        .strictObject({ type: z.enum(PARAM_TYPE_NAMES), min: bound.optional(), max: bound.optional(), ...maxCount })
        .refine((spec) => (spec.min === undefined && spec.max === undefined) || spec.type === 'integer' || spec.type === 'positive_integer', 'min and max bound an integer or positive_integer only')
        .refine((spec) => spec.min === undefined || spec.max === undefined || spec.min <= spec.max, 'min is above max')
        .refine((spec) => spec.type !== 'positive_integer' || spec.min === undefined || spec.min >= 1, 'a positive_integer is 1 or more'),
    ]),
  ],
  { error: `a type (${PARAM_TYPE_NAMES.join(', ')}), or { type: integer, min, max }, { type: enum, values: […] }, { type: string, alphabet, max_length }` },
);

export const bodySchema = z.strictObject({
  content_types: z
    .array(z.string().regex(/^application\/(?:[a-z0-9.-]+\+)?json$/, 'the gateway checks JSON bodies only: application/json or application/<name>+json, lower case'))
    .min(1)
    .refine((types) => new Set(types).size === types.length, 'media types are listed once each')
    .describe('Media types the route takes, without parameters (a `charset` other than UTF-8 is refused).'),
  max_bytes: z.number().int().min(1).max(MAX_BODY_BYTES).describe('Largest body taken, in bytes; more is 413.'),
});

/**
 * A route's `query` that forwards whatever query comes: spelled out, never the default, since an
 * upstream that reads its query could be told an `acquirer_id` of the client's choosing.
 */
export const UNCHECKED_QUERY = 'any';

export const DEFAULT_TENANT_FIELDS = ['acquirer_id', 'acquirer'] as const;

/** Largest rate a limit may declare; beyond it a limit would cost more than it protects. */
export const MAX_RATE_PER_SECOND = 1_000_000;

export const rateLimitSchema = z
  .strictObject({
    per_second: z
      .number()
      .positive()
      .max(MAX_RATE_PER_SECOND)
      .describe('Requests per second one key may make, sustained; a fraction for slower (0.2: one every 5 s).'),
    burst: z.number().int().min(1).max(MAX_RATE_PER_SECOND).describe('Requests one key may make at once, after a pause; at least 1.'),
  })
  .refine((rate) => !(rate.per_second > 0) || rate.burst / rate.per_second <= 86_400, 'burst / per_second is more than a day: a bucket that slow to fill is a quota, not a rate');

export const routeSchema = z.strictObject({
  id: z
    .string()
    .regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be lower case letters, digits and underscores, starting with a letter')
    .describe('Stable identifier; used in metrics and logs.'),
  method: z.enum(HTTP_METHODS).describe('HTTP method, upper case. HEAD and OPTIONS are never implied.'),
  path: z.string().describe('Path template: literal segments and at most one :name parameter per segment.'),
  params: z
    .record(z.string(), valueSpec)
    .optional()
    .describe('Type of each :name parameter of the path: a type name, a bounded integer or an enumeration.'),
  query: z
    .union([z.literal(UNCHECKED_QUERY), z.record(z.string(), valueSpec)], {
      error: `the query parameters the route takes, each with its type (\`{ page: positive_integer }\`), \`{}\` for none, or \`${UNCHECKED_QUERY}\``,
    })
    .optional()
    .describe(
      `The query parameters the route takes, each with its type: any other, one given twice, or a value not of its type is refused (400). Absent or \`{}\`: none (absent on a \`serve\` route: any, unread). \`${UNCHECKED_QUERY}\`: the query is forwarded unchecked, which a route must ask for.`,
    ),
  body: bodySchema.optional().describe('The request body the route takes (JSON, checked whole before it goes upstream). Absent: none; a request with one is refused.'),
  permissions: z
    .array(permissionName)
    .describe('Permissions the key must carry, all of them. Empty: any valid key.'),
  serve: z
    .enum(SERVED_BY_GATEWAY)
    .optional()
    .describe('Answered by the gateway itself instead of the upstream.'),
  rate_limit: rateLimitSchema
    .optional()
    .describe("This route's own rate per key, counted apart from the default's (docs/policy.md, \"Rate limits\"). Absent: the policy's `rate_limits.default`, if any."),
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
  tenant_fields: z
    .array(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a member name of 1 to 64 of A-Z a-z 0-9 _ . -'))
    .default([...DEFAULT_TENANT_FIELDS])
    .describe(`Member names a request body may not hold at any depth, in any case: they would name the tenant, which only the acquirer header does. Default ${DEFAULT_TENANT_FIELDS.join(', ')}.`),
  rate_limits: z
    .strictObject({ default: rateLimitSchema.describe('Each key\'s rate over every route without a `rate_limit` of its own, counted together.') })
    .optional()
    .describe('Rates per key (docs/policy.md, "Rate limits"); over one: 429. Absent: no rate is limited.'),
  permissions: z.array(permissionSchema).min(1).describe('The permission catalogue.'),
  routes: z.array(routeSchema).min(1).describe('The routes; anything else is 404.'),
});

export type PolicyDocument = z.infer<typeof policySchema>;
