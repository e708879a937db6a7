/**
 * @module
 * The merchant-user body checked field by field, as the API's 422 reports it:
 * `{"message": "Validation failed: email is invalid", "errors": {"email": ["is invalid"]}}`.
 */
import { invalid } from './sample-http.js';

export interface UserFields {
  readonly name: string;
  readonly email: string;
  readonly description: string | null;
  readonly permissions: string[];
}

type Errors = Record<string, string[]>;

// Deliberately loose (one @, a dot in the domain, no spaces): the sample checks shape, not deliverability.
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The body as a JSON object; a missing body is an empty one, anything else not an object a 422. */
function bodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid({ body: ['must be a JSON object'] });
  return body as Record<string, unknown>;
}

const blank = (value: unknown) => typeof value !== 'string' || value.trim() === '';

/** Adds the problems of the fields create and update share: `name` when given, `description`, `permissions`. */
function checkEditable(body: Record<string, unknown>, errors: Errors): void {
  if ('name' in body && blank(body.name)) errors.name = ["can't be blank"];
  if (body.description !== undefined && body.description !== null && typeof body.description !== 'string') errors.description = ['must be a string'];
  if (body.permissions !== undefined && !(Array.isArray(body.permissions) && body.permissions.every((p) => typeof p === 'string'))) {
    errors.permissions = ['must be an array of strings'];
  }
}

/** The fields of a new user, or a 422: `name` and `email` required, the email not one of `takenEmails` (any case). */
export function newUserFields(body: unknown, takenEmails: readonly string[]): UserFields {
  const fields = bodyObject(body);
  const errors: Errors = {};
  if (blank(fields.name)) errors.name = ["can't be blank"];
  if (blank(fields.email)) errors.email = ["can't be blank"];
  else if (!EMAIL.test((fields.email as string).trim())) errors.email = ['is invalid'];
  else if (takenEmails.some((e) => e.toLowerCase() === (fields.email as string).trim().toLowerCase())) errors.email = ['has already been taken'];
  checkEditable(fields, errors);
  if (Object.keys(errors).length > 0) throw invalid(errors);
  return {
    name: (fields.name as string).trim(),
    email: (fields.email as string).trim(),
    description: (fields.description as string | null | undefined) ?? null,
    permissions: [...((fields.permissions as string[] | undefined) ?? [])],
  };
}

/** What an update changes (only the fields given), or a 422; an `email` in the body is refused, as it cannot change. */
export function userChanges(body: unknown): Partial<Omit<UserFields, 'email'>> {
  const fields = bodyObject(body);
  if ('email' in fields) throw invalid({ email: ['cannot be changed'] }, 'email cannot be changed');
  const errors: Errors = {};
  checkEditable(fields, errors);
  if (Object.keys(errors).length > 0) throw invalid(errors);
  return {
    ...(fields.name !== undefined ? { name: (fields.name as string).trim() } : {}),
    ...('description' in fields ? { description: (fields.description as string | null | undefined) ?? null } : {}),
    ...(fields.permissions !== undefined ? { permissions: [...(fields.permissions as string[])] } : {}),
  };
}
