/**
 * @module
 * The one way a listener is opened: a promise of the port bound, rejected with the listen's error.
 */
import net, { type AddressInfo } from 'node:net';

/** Listens on `host:port` and resolves to the port bound (the free one chosen for port 0). */
export function listen(server: net.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** A port free on `host` just now, as the kernel picks one for a listen on port 0. */
export async function freePort(host: string): Promise<number> {
  const probe = net.createServer();
  const port = await listen(probe, 0, host);
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
