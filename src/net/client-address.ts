import { parseAddress, type IpAddress, type IpAllowlist } from './ip-allowlist.js';

/**
 * Decides who the client is. The socket peer, unless it is a trusted proxy: then X-Forwarded-For is
 * walked from the right, skipping trusted proxies, and the first other address is the client.
 * Returns null when the answer cannot be trusted (an unparseable address in the chain): a key with a
 * whitelist is then refused, never let through on a guess.
 */
export function resolveClientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | undefined,
  trustedProxies: IpAllowlist | null,
): IpAddress | null {
  const peer = parseAddress(socketAddress);
  if (peer === null || trustedProxies === null || !trustedProxies.contains(peer)) return peer;
  if (forwardedFor === undefined || forwardedFor.trim() === '') return peer;
  const hops = forwardedFor.split(',');
  let client: IpAddress = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = parseAddress(hops[i]!.trim());
    if (hop === null) return null;
    client = hop;
    if (!trustedProxies.contains(hop)) return hop;
  }
  return client; // every hop is a trusted proxy: the left-most is as far as we can see
}
