/**
 * @module
 * What the `keys` commands accept, checked completely before anything is written: permission names
 * against the policy's catalogue, whitelist entries, acquirer ids, and key ids (never a key itself).
 */
import { CONFIG_FIELDS } from '../config/env.js';
import { isValidAcquirerId, KEY_ID } from '../keys/api-key.js';
import { familyCoveredWhole, parseCidr } from '../net/ip-allowlist.js';
import { formatPolicyError, loadPolicy } from '../policy/load.js';
import { holdsKey, redactSecrets } from '../secrets/redact.js';
import { CommandError, UsageError } from './command-line.js';
import { setting } from './settings.js';

/** A comma-separated list, its entries trimmed, empty ones dropped. */
export function list(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

async function permissionCatalogue(env: NodeJS.ProcessEnv): Promise<ReadonlySet<string>> {
  const loaded = await loadPolicy(setting(env, CONFIG_FIELDS.policyFile));
  if (!loaded.ok) throw new CommandError(`cannot check permissions against the policy's catalogue:\n${loaded.errors.map(formatPolicyError).join('\n')}`);
  return loaded.policy.permissionNames;
}

export async function validPermissions(text: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const names = [...new Set(list(text))];
  if (names.length === 0) throw new UsageError('--permissions: give at least one permission');
  const catalogue = await permissionCatalogue(env);
  const unknown = names.filter((n) => !catalogue.has(n));
  if (unknown.length > 0) throw new UsageError(`--permissions: unknown permission ${unknown.map((n) => `"${n}"`).join(', ')} (not in the policy's catalogue)`);
  return names;
}

/**
 * An empty list (say, from an unset shell variable) would silently mean "any address", so it is
 * refused: leaving the whitelist out, or `--allow-any-ip` on update, says so explicitly.
 */
export function validAllowedIps(text: string): string[] {
  if (list(text).length === 0) {
    throw new UsageError('--allow-ip: no address given; leave --allow-ip out (create) or use --allow-any-ip (update) to allow every address');
  }
  const cidrs: string[] = [];
  for (const entry of list(text)) {
    const parsed = parseCidr(entry);
    if (!parsed.ok) throw new UsageError(`--allow-ip: "${entry}": ${parsed.reason}${parsed.everyAddress ? '; leave --allow-ip out to allow every address' : ''}`);
    if (!cidrs.includes(parsed.cidr)) cidrs.push(parsed.cidr);
  }
  const whole = familyCoveredWhole(cidrs);
  if (whole !== null) {
    throw new UsageError(`--allow-ip: together these allow every ${whole} address, as a /0 would; list the networks the key is used from`);
  }
  return cidrs;
}

/**
 * The one spelling a new key's acquirer may have: lower-case letters, digits, `_` and `-`, starting
 * with a letter or digit. `ACQ_ALPHA`, `acq_alpha.` or `acq_alpha:acq_beta` beside `acq_alpha` would
 * be alpha to an upstream that compares without case or splits on `:` or `.`. (Records already
 * stored with another spelling still work: the store reads what it wrote.)
 */
const CANONICAL_ACQUIRER = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** The acquirer a new key acts for: it travels upstream as a header value, and is printed by show and list. */
export function validAcquirer(text: string | undefined): string {
  const acquirer = (text ?? '').trim();
  if (acquirer === '') throw new UsageError('--acquirer: required and must not be empty');
  if (holdsKey(acquirer)) throw new UsageError('--acquirer: this is shaped like an API key; it was not stored or printed');
  if (!CANONICAL_ACQUIRER.test(acquirer) || !isValidAcquirerId(acquirer)) {
    throw new UsageError('--acquirer: 1 to 64 of lower-case a-z, 0-9, _ and -, starting with a letter or digit (one spelling per acquirer)');
  }
  return acquirer;
}

/** Longest description, in characters: it is printed on one line by show and list. */
const MAX_DESCRIPTION_CHARACTERS = 256;
/** Control characters, and the bidirectional overrides and isolates that make text show other than it reads. */
const UNSAFE_IN_TEXT = /[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

/** A description is stored and printed by show and list: never a key, and text that shows as it reads. */
export function validDescription(text: string | undefined): string {
  if (text === undefined) return '';
  if (holdsKey(text)) throw new UsageError('--description: holds something shaped like an API key; it was not stored or printed');
  if ([...text].length > MAX_DESCRIPTION_CHARACTERS) throw new UsageError(`--description: at most ${MAX_DESCRIPTION_CHARACTERS} characters`);
  if (UNSAFE_IN_TEXT.test(text)) {
    throw new UsageError('--description: no control characters (newlines and tabs included) and no bidirectional overrides or isolates (U+202A-202E, U+2066-2069): they change how the text around them shows');
  }
  return text;
}

/**
 * What a key id can be: `key_` and 20 hex digits as created, with room for ids written by hand, but
 * never as long as a key's random part (43 characters or more), `key_` before it or not.
 */

/**
 * The key id a command names. An operator who pastes the API key itself instead gets a usage error
 * that does not repeat it, before it is looked up: as a lookup it would have gone to Redis as part of
 * a key name, and come back in "no key with id …".
 */
export function keyIdArgument(text: string): string {
  if (/acquirer_/i.test(text) || redactSecrets(text) !== text) {
    throw new UsageError('expected a key id (key_…), and this argument is shaped like an API key: it was not looked up or printed. `keys list --acquirer <id>` shows the ids');
  }
  // Anything else that is no id (the key's random part pasted alone, say) is not repeated either.
  if (!KEY_ID.test(text)) {
    throw new UsageError('expected a key id (key_ and letters, digits, _ or -, as create and list print it); this argument is not one: it was not looked up or printed. `keys list --acquirer <id>` shows the ids');
  }
  return text;
}
