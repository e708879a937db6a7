/**
 * @module
 * Workaround of Node's http.Server: which connections `close()` takes for idle.
 *
 * Relies on (undocumented): `server.close()` calls `this.closeIdleConnections()` (Node 19 and
 * later), so a subclass decides what closes. Node's own check takes a connection whose answer has
 * ended for idle though its last bytes may still wait to be written, and destroying it lost them
 * (an HTTP/1.0 client took the short body for whole).
 * Canary: test/unit/node-internals/idle-connections.test.ts.
 */
import http from 'node:http';

/** An http.Server whose idle connections are the ones `closeIdle` closes, when it is set. */
export class IdleAwareServer extends http.Server {
  /** Closes the connections that are idle (http/pipelining-and-drain.ts sets it). */
  closeIdle: (() => void) | undefined = undefined;

  override closeIdleConnections(): void {
    if (this.closeIdle === undefined) super.closeIdleConnections();
    else this.closeIdle();
  }
}
