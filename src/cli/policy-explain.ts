/**
 * @module
 * `acquirer-gateway policy explain METHOD TARGET --key-id ID`: how the gateway would judge a request,
 * step by step (policy/explain.ts), for a key read from Redis by its id. Nothing is sent anywhere.
 */
import { METHODS, type OutgoingHttpHeaders } from 'node:http';
import { CONFIG_FIELDS } from '../config/env.js';
import type { ApiKeyRecord } from '../keys/api-key.js';
import { KeyNotFoundError } from '../keys/key-store.js';
import { toVerdict } from '../keys/key-verdict.js';
import { ACQUIRER_KEY_ID_HEADER, ACQUIRER_SIGNATURE_HEADER } from '../net/header-names.js';
import { parseAddress, type IpAddress } from '../net/ip-allowlist.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { explainRequest, type ExplainedKey, type Explanation, type UpstreamSigning } from '../policy/explain.js';
import { createAcquirerSigner } from '../proxy/acquirer-signature.js';
import { AnsweredNo, parseCommandLine, UsageError } from './command-line.js';
import { keyIdArgument } from './key-arguments.js';
import { withKeyStore } from './key-store-access.js';
import { setting } from './settings.js';

export interface ExplainContext {
  readonly env: NodeJS.ProcessEnv;
  readonly out: (text: string) => void;
  /** Loads a policy, its problems printed (exit 1). */
  readonly load: (file: string) => Promise<CompiledPolicy>;
  /** POLICY_FILE, as serve reads it. */
  readonly defaultFile: () => string;
  /** Its usage, for a usage error. */
  readonly usage: string;
}

interface ExplainArguments {
  readonly method: string;
  readonly target: string;
  readonly keyId: string;
  readonly from: IpAddress | undefined;
  readonly policyFile: string | undefined;
}

/** Node's HTTP parser reads a request-target of visible ASCII only: anything else is its 400, not the policy's. */
const REQUEST_TARGET = /^[\x21-\x7e]+$/;

function parseExplainArguments(args: string[], usage: string): ExplainArguments {
  let parsed;
  try {
    parsed = parseCommandLine(args, { 'key-id': { type: 'string' }, from: { type: 'string' }, policy: { type: 'string' } }, true);
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`);
  }
  const [method, target, ...extra] = parsed.positionals;
  if (method === undefined || target === undefined || extra.length > 0) throw new UsageError(`explain takes a METHOD and a TARGET\n${usage}`);
  if (!METHODS.includes(method)) {
    throw new UsageError(`METHOD: ${JSON.stringify(method)} is not a method Node's HTTP parser reads (upper case: GET, POST, PUT …)`);
  }
  if (!REQUEST_TARGET.test(target)) {
    throw new UsageError('TARGET: a request-target is visible ASCII, without spaces (percent-encode the rest); Node refuses others (400)');
  }
  const keyId = parsed.values['key-id'];
  if (typeof keyId !== 'string') throw new UsageError(`--key-id: required\n${usage}`);
  const fromText = parsed.values.from as string | undefined;
  const from = fromText === undefined ? undefined : parseAddress(fromText);
  if (from === null) throw new UsageError(`--from: ${JSON.stringify(fromText)} is not an IP address (IPv4 in dotted decimal, or IPv6)`);
  return { method, target, keyId: keyIdArgument(keyId), from, policyFile: parsed.values.policy as string | undefined };
}

/** The key as the request path reads its record: toVerdict, the resolver's own reading. */
function explainedKey(record: ApiKeyRecord): ExplainedKey {
  const verdict = toVerdict(record);
  if (verdict.kind === 'valid') return { kind: 'valid', ...verdict.key, allowedIps: record.allowed_ips };
  return { kind: 'disabled', id: record.id, acquirerId: record.acquirer_id, disabledAt: record.disabled_at ?? 'an unknown time' };
}

/**
 * ACQUIRER_SIGNING_SECRET as serve reads it (a bad value is a usage error that never quotes it): the
 * proxy's own signer, so that the headers listed are those it would send this second. Undefined when
 * unset: nothing is signed. `now`: the wall clock, ms (tests).
 */
export function upstreamSigning(env: NodeJS.ProcessEnv, now?: () => number): UpstreamSigning | undefined {
  const sign = createAcquirerSigner(setting(env, CONFIG_FIELDS.acquirerSigningSecret), now);
  if (sign === undefined) return undefined;
  return (method, target, key) => {
    const headers: OutgoingHttpHeaders = {};
    sign(headers, method, target, key);
    return [ACQUIRER_KEY_ID_HEADER, ACQUIRER_SIGNATURE_HEADER].map((name) => ({ name, value: String(headers[name]) }));
  };
}

/** `policy explain`: prints the explanation; a refused request exits 3 (AnsweredNo). */
export async function explainCommand(args: string[], ctx: ExplainContext): Promise<void> {
  const request = parseExplainArguments(args, ctx.usage);
  const sign = upstreamSigning(ctx.env);
  const file = request.policyFile ?? ctx.defaultFile();
  const policy = await ctx.load(file);
  const record = await withKeyStore(ctx.env, async (store) => {
    const found = await store.findById(request.keyId);
    if (found === null) throw new KeyNotFoundError(request.keyId);
    return found;
  });
  const explanation = explainRequest(policy, explainedKey(record), request, sign);
  ctx.out(explanationText(explanation, request, file));
  if (explanation.verdict.kind === 'refused') throw new AnsweredNo(`refused: ${explanation.verdict.code}`);
}

const TITLE_WIDTH = 18;
const OUTCOME_WIDTH = 12;

/** The explanation as a terminal shows it: the steps, the verdict, and what could still refuse it. */
export function explanationText(explanation: Explanation, request: Pick<ExplainArguments, 'method' | 'target' | 'keyId'>, file: string): string {
  const lines = [`${request.method} ${request.target}`, `key ${request.keyId}, policy ${file}`, ''];
  const judged = explanation.steps.filter((step) => step.outcome !== 'not reached');
  for (const step of judged) lines.push(`  ${step.title.padEnd(TITLE_WIDTH)}${step.outcome.padEnd(OUTCOME_WIDTH)}${step.says}`);
  const rest = explanation.steps.filter((step) => step.outcome === 'not reached');
  if (rest.length > 0) lines.push(`  not reached: ${rest.map((step) => step.title).join(', ')}`);
  lines.push('');
  const { verdict } = explanation;
  if (verdict.kind === 'refused') {
    const by = explanation.steps.find((step) => step.outcome === 'refuses')!.title;
    lines.push(`refused at the ${by} step (${verdict.code}); the gateway answers`, `  ${verdict.status} ${verdict.body}`);
  } else if (verdict.kind === 'served') {
    lines.push('allowed; the gateway answers it itself, and nothing goes upstream', `  ${verdict.status} the permission catalogue`);
  } else {
    lines.push('allowed; the upstream receives', `  ${verdict.method} ${verdict.target}`, `  ${verdict.header.name}: ${verdict.header.value}`);
    if (verdict.signed !== undefined) {
      lines.push(...verdict.signed.map((header) => `  ${header.name}: ${header.value}`));
      lines.push('  (ACQUIRER_SIGNING_SECRET: signed for this second, t; the gateway signs each request as it sends it)');
    }
  }
  const unless = explanation.steps.flatMap((step) => (step.unless === undefined ? [] : [`  - ${step.unless}`]));
  if (unless.length > 0) lines.push('unless, in steps not judged here:', ...unless);
  return lines.join('\n') + '\n';
}
