/**
 * @module
 * What a setting is: its variable, default, documentation and schema (env.ts lists them).
 */
import type { z } from 'zod';

export interface FieldSpec<T> {
  readonly env: string;
  readonly default: string | undefined;
  /** One line for `serve --help` (at most 56 characters). */
  readonly summary: string;
  /** The whole story, for docs/configuration.md (generated from these: `npm run docs`). */
  readonly description: string;
  readonly schema: z.ZodType<T, string>;
  /** Never echo the value in an error: it may hold a password. */
  readonly secret?: boolean;
}

export const field = <T>(spec: FieldSpec<T>) => spec;
