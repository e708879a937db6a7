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
  /** Worker → primary: it listens on `port`, running the policy whose hash is `policy`. */
  | { readonly tag: typeof TAG; readonly type: 'ready'; readonly port: number; readonly policy: string }
  /** Primary → worker: drain and go. Worker → primary: send me the accepted policy. */
  | { readonly tag: typeof TAG; readonly type: 'shutdown' | 'get-policy' }
  /** Primary → worker: the policy it accepted, and the public port (the same for every worker). */
  | { readonly tag: typeof TAG; readonly type: 'policy'; readonly file: string; readonly source: string; readonly port: number }
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

export type Answer = Message & { type: 'answer' };
export type PolicyMessage = Message & { type: 'policy' };

export const isMessage = (m: unknown): m is Message => typeof m === 'object' && m !== null && (m as { tag?: unknown }).tag === TAG;

/** The policy a message from the primary carries, compiled. The primary accepted this text, so it compiles here too. */
export function compileGiven(message: PolicyMessage): CompiledPolicy {
  const result = parsePolicy(message.source, message.file);
  if (!result.ok) throw new PolicyLoadError(result.errors);
  return result.policy;
}
