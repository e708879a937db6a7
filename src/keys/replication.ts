/**
 * @module
 * Whether a write reached a replica: key administration asks after each change, since a change only
 * the primary holds is lost if it fails before passing it on (docs/operations.md, "Redis that fails over").
 */
import type { Redis } from 'ioredis';

/**
 * Key administration, after a write on `writer`: how many replicas its primary has, and whether
 * one of them confirmed the connection's writes within `timeoutMs` (WAIT). Replication is
 * asynchronous: a write no replica holds is lost if that primary fails now. Throws when the node
 * is no primary (demoted meanwhile): what it wrote cannot be vouched for.
 */
export async function replication(writer: Redis, timeoutMs: number): Promise<{ readonly replicas: number; readonly confirmed: boolean }> {
  const role = (await writer.call('ROLE')) as [string, number, unknown[]?];
  if (role[0] !== 'master') throw new Error(`the node written to now answers ROLE as ${role[0]}`);
  const replicas = Array.isArray(role[2]) ? role[2].length : 0;
  if (replicas === 0) return { replicas, confirmed: false };
  return { replicas, confirmed: Number(await writer.call('WAIT', '1', String(timeoutMs))) >= 1 };
}
