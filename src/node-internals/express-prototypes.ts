/**
 * @module
 * Workaround of Node's http.Server and Express: requests and responses born with Express's
 * prototypes, rather than given them by Express as each request arrives.
 *
 * Relies on (undocumented): `http.IncomingMessage` and `http.ServerResponse` are constructor
 * functions of the old kind, which build whatever object they are called on (each takes at most two
 * arguments), so a plain function can build its own `new` object with them, without
 * `Reflect.construct` and an array of arguments on every request. Express then finds the prototype
 * it would set already there (`Object.setPrototypeOf` with the same prototype changes nothing), and
 * no object changes shape mid-way (the figure is in docs/performance.md).
 * Canary: test/unit/node-internals/express-prototypes.test.ts.
 */
import http from 'node:http';

type Build = (this: object, a: unknown, b: unknown) => void;

/** A constructor that makes what `base` makes, with `prototype` (which inherits from base's) as its prototype. */
export function bornWith<T>(base: T, prototype: object): T {
  const build = base as unknown as Build;
  function Born(this: object, a: unknown, b: unknown): void {
    build.call(this, a, b);
  }
  Born.prototype = prototype;
  return Born as unknown as T;
}

/** http.createServer's options that make every request and response an Express one from birth. */
export function expressBorn(app: { request: object; response: object }): Pick<http.ServerOptions, 'IncomingMessage' | 'ServerResponse'> {
  return {
    IncomingMessage: bornWith(http.IncomingMessage, app.request),
    ServerResponse: bornWith(http.ServerResponse, app.response),
  };
}
