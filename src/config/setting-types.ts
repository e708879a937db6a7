/**
 * @module
 * The kinds of value a setting can take, each a zod schema over the text of an environment variable
 * or flag, with the message that says what is allowed.
 */
import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { familyCoveredWhole, parseCidr } from '../net/ip-allowlist.js';

export const integer = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be an integer from ${min} to ${max}`);

/** `auto`: one per core the process may use. */
export const workerCount = z.string().transform((text, ctx) => {
  if (text === 'auto') return availableParallelism();
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 256)) ctx.addIssue({ code: 'custom', message: 'must be auto or an integer from 1 to 256' });
  return n;
});
/** `half` (UPSTREAM_MAX_SOCKETS's, rounded up: resolved by loadConfig, as 0 here) or a count. */
export const shareOfPool = z.string().transform((text, ctx) => {
  if (text === 'half') return 0;
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 65535)) ctx.addIssue({ code: 'custom', message: 'must be half or an integer from 1 to 65535' });
  return n;
});
export const httpOrigin = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be an absolute http:// or https:// URL' });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') ctx.addIssue({ code: 'custom', message: 'must use http or https' });
  else if (url.username || url.password) ctx.addIssue({ code: 'custom', message: 'must not contain credentials' });
  else if (url.pathname !== '/' || url.search || url.hash) {
    // The path a client asked for goes upstream exactly as matched; a base path would change it.
    ctx.addIssue({ code: 'custom', message: 'must be an origin (scheme, host, port) without path, query or fragment' });
  }
});

/**
 * The database is the path's number and nothing else: ioredis reads any other path as database 0
 * (after a failed SELECT), and takes options from a query (`?db=`, `?password=`), so either would
 * have the gateway check keys against another set than the one named.
 */
export const redisUrl = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return void ctx.addIssue({ code: 'custom', message: 'must be a redis:// or rediss:// URL' });
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') ctx.addIssue({ code: 'custom', message: 'must use redis:// or rediss://' });
  else if (!/^(?:\/(?:0|[1-9]\d{0,8})?)?$/.test(url.pathname)) ctx.addIssue({ code: 'custom', message: 'the path must be a database number (redis://host:6379/2), or nothing' });
  else if (url.search !== '' || url.hash !== '') ctx.addIssue({ code: 'custom', message: 'must not have a query or fragment (the database is the path: redis://host:6379/2)' });
});

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** `host:port,host:port` (IPv6 in brackets: `[::1]:26379`); empty for none. */
export const hostPortList = z.string().transform((text, ctx) => {
  const out: HostPort[] = [];
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/.exec(entry);
    const port = m === null ? NaN : Number(m[3]);
    if (m === null || !(port >= 1 && port <= 65535)) ctx.addIssue({ code: 'custom', message: `"${entry}": must be host:port ([::1]:26379 for IPv6)` });
    else out.push({ host: m[1] ?? m[2]!, port });
  }
  return out;
});

export const cidrList = z.string().transform((text, ctx) => {
  const cidrs: string[] = [];
  for (const entry of text.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const parsed = parseCidr(entry);
    if (!parsed.ok) ctx.addIssue({ code: 'custom', message: `"${entry}": ${parsed.reason}${parsed.everyAddress ? "; list exactly the proxies' addresses" : ''}` });
    else cidrs.push(parsed.cidr);
  }
  const whole = familyCoveredWhole(cidrs);
  if (whole !== null) ctx.addIssue({ code: 'custom', message: `together these trust every ${whole} address` });
  return cidrs;
});

/** An IP literal to bind to. */
export const ipLiteral = (example: string) => z.string().refine((h) => isIP(h) !== 0, `must be an IPv4 or IPv6 address, e.g. ${example}`);

export const booleanText = z.enum(['true', 'false'], 'must be true or false').transform((v) => v === 'true');

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const logLevel = z.enum(LOG_LEVELS, `must be one of ${LOG_LEVELS.join(', ')}`);

/** A bearer token for the admin listener: none (empty), or 16 to 256 visible ASCII characters. */
export const adminToken = z.string().refine((text) => text === '' || /^[\x21-\x7e]{16,256}$/.test(text), 'must be empty (none) or 16 to 256 visible ASCII characters');

/** What a signing secret may hold: no comma (the separator), white space or control character. */
const SECRET_TEXT = /^[^\s,\p{Cc}]*$/u;
const MIN_SIGNING_SECRET_LENGTH = 32;

/**
 * ACQUIRER_SIGNING_SECRET: none (empty), one secret, or two separated by a comma while rotating (the
 * new one first). No message quotes the value, or any part of it.
 */
export const signingSecrets = z.string().transform((text, ctx): readonly string[] => {
  if (text === '') return [];
  const secrets = text.split(',');
  const which = (i: number) => (secrets.length === 1 ? 'the secret' : i === 0 ? 'the first secret' : 'the second secret');
  if (secrets.length > 2) ctx.addIssue({ code: 'custom', message: `holds ${secrets.length} comma-separated secrets; at most 2 (the new one, then the old one, while rotating)` });
  else {
    secrets.forEach((secret, i) => {
      if (!SECRET_TEXT.test(secret)) ctx.addIssue({ code: 'custom', message: `${which(i)} holds white space or a control character` });
      else if (secret.length < MIN_SIGNING_SECRET_LENGTH) ctx.addIssue({ code: 'custom', message: `${which(i)} is shorter than ${MIN_SIGNING_SECRET_LENGTH} characters` });
    });
  }
  return secrets;
});
