/**
 * @module
 * The messages between the cluster primary and its workers. Each carries a tag, so that nothing
 * else's messages on the channel are mistaken for them.
 */
import type { ReadinessCheck } from '../admin/admin-server.js';
import type { WorkerMetrics } from '../observability/metrics/worker-sums.js';
import type { CompiledPolicy } from '../policy/compile.js';
import { parsePolicy, PolicyLoadError } from '../policy/load.js';

export const TAG = 'acquirer-gateway';

export type Message =
  /** Worker → primary: it listens on `port`, running the policy whose hash is `policy` (and the shadow policy whose hash is `shadow`, if any). */
  | { readonly tag: typeof TAG; readonly type: 'ready'; readonly port: number; readonly policy: string; readonly shadow?: string | undefined }
  /** Primary → worker: drain and go. Worker → primary: send me the accepted policy. */
  | { readonly tag: typeof TAG; readonly type: 'shutdown' | 'get-policy' }
  /**
   * Primary → worker: the policy it accepted, and the public port (the same for every worker). The
   * answer to `get-policy` also carries the shadow policy accepted (POLICY_SHADOW_FILE), if there is
   * one: a worker starts with it, and is sent each later one as `shadow-policy`.
   */
  | { readonly tag: typeof TAG; readonly type: 'policy'; readonly file: string; readonly source: string; readonly port: number; readonly shadow?: PolicyText | undefined }
  /** Primary → worker: the shadow policy it accepted (POLICY_SHADOW_FILE), to judge in the shadow by from now on. */
  | { readonly tag: typeof TAG; readonly type: 'shadow-policy'; readonly file: string; readonly source: string }
  /** Primary → worker: a question, answered by an `answer` with the same id. */
  | { readonly tag: typeof TAG; readonly type: 'readiness' | 'metrics'; readonly id: number }
  | {
      readonly tag: typeof TAG;
      readonly type: 'answer';
      readonly id: number;
      /** With `readiness`: the hash of the policy the worker runs. */
      readonly policy?: string;
      readonly readiness?: ReadinessCheck;
      readonly metrics?: WorkerMetrics;
    };

/** A policy file's text as the primary accepted it, and the file's name for any problem found compiling it. */
export interface PolicyText {
  readonly file: string;
  readonly source: string;
}

export type Answer = Message & { type: 'answer' };
export type PolicyMessage = Message & { type: 'policy' };
export type ShadowPolicyMessage = Message & { type: 'shadow-policy' };

export const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;

/** A policy the primary sent, compiled. The primary accepted this text, so it compiles here too. */
export function compileGiven(given: PolicyText): CompiledPolicy {
  const result = parsePolicy(given.source, given.file);
  if (!result.ok) throw new PolicyLoadError(result.errors);
  return result.policy;
}
