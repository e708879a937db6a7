import type { Socket } from 'node:net';
import { parseAddress, type IpAddress, type IpAllowlist } from './ip-allowlist.js';

const peers = new WeakMap<Socket, IpAddress | null>();
const texts = new WeakMap<IpAddress, string>();

/**
 * The socket's peer, parsed once per connection: a keep-alive connection carries many requests.
 * Read it while the request is live; once the connection is gone the socket no longer knows its peer.
 */
export function peerAddress(socket: Socket): IpAddress | null {
  let peer = peers.get(socket);
  if (peer === undefined) {
    peer = parseAddress(socket.remoteAddress);
    peers.set(socket, peer);
  }
  return peer;
}

/** An address as logs show it (canonical form), worked out once per address object. */
export function addressText(address: IpAddress): string {
  let text = texts.get(address);
  if (text === undefined) {
    text = address.toString();
    texts.set(address, text);
  }
  return text;
}

/** The socket's peer as logs show it, or null once the connection is gone. */
export function peerText(socket: Socket): string | null {
  const peer = peerAddress(socket);
  return peer === null ? null : addressText(peer);
}

/**
 * Decides who the client is. The socket peer, unless it is a trusted proxy: then X-Forwarded-For is
 * walked from the right, skipping trusted proxies, and the first other address is the client.
 * Returns null when the answer cannot be trusted (an unparseable address in the chain): a key with a
 * whitelist is then refused, never let through on a guess.
 */
export function resolveClientAddress(peer: IpAddress | null, forwardedFor: string | undefined, trustedProxies: IpAllowlist | null): IpAddress | null {
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
