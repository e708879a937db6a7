import type { IncomingHttpHeaders } from 'node:http';
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
 * How many addresses of X-Forwarded-For are looked at, from the right. No real chain of proxies is
 * this long; a client that can send the header through them (one inside TRUSTED_PROXIES, or a
 * balancer that passes the header on) could otherwise make every request parse a thousand.
 */
export const MAX_FORWARDED_HOPS = 32;

/**
 * Decides who the client is. The socket peer, unless it is a trusted proxy: then X-Forwarded-For is
 * walked from the right, skipping trusted proxies, and the first other address is the client.
 * Returns null when the answer cannot be trusted (an unparseable address in the chain, or more than
 * MAX_FORWARDED_HOPS trusted ones): a key with a whitelist is then refused, never let through on a guess.
 */
export function resolveClientAddress(peer: IpAddress | null, forwardedFor: string | undefined, trustedProxies: IpAllowlist | null): IpAddress | null {
  if (peer === null || trustedProxies === null || !trustedProxies.contains(peer)) return peer;
  if (forwardedFor === undefined || forwardedFor.trim() === '') return peer;
  const hops = forwardedFor.split(',');
  let client: IpAddress = peer;
  for (let i = hops.length - 1; i >= Math.max(hops.length - MAX_FORWARDED_HOPS, 0); i--) {
    const hop = parseAddress(hops[i]!.trim());
    if (hop === null) return null;
    client = hop;
    if (!trustedProxies.contains(hop)) return hop;
  }
  if (hops.length > MAX_FORWARDED_HOPS) return null; // trusted as far as it was looked at, and no further
  return client; // every hop is a trusted proxy: the left-most is as far as we can see
}

/**
 * The client of a request, as judged: the socket peer, or the X-Forwarded-For walk when the peer is
 * a trusted proxy (resolveClientAddress); null when it cannot be known. The one decision both the
 * IP whitelist and the access line use.
 */
export function requestClient(peer: IpAddress | null, headers: IncomingHttpHeaders, trustedProxies: IpAllowlist | null): IpAddress | null {
  const forwardedFor = headers['x-forwarded-for'];
  return resolveClientAddress(peer, typeof forwardedFor === 'string' ? forwardedFor : undefined, trustedProxies);
}

/** A client address as logs show it, or null. */
export function clientText(client: IpAddress | null): string | null {
  return client === null ? null : addressText(client);
}
