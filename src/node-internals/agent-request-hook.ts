/**
 * @module
 * Workaround of Node's http.Agent: a subclass that sees each request as Node hands it to the agent.
 *
 * Relies on (undocumented): the ClientRequest constructor calls `agent.addRequest(req, options)`
 * synchronously, before the request has a connection and before its response parser is set up from
 * `req.maxHeadersCount`. Agents on npm (agent-base, agentkeepalive) override it too.
 * Needed for: an answer's header-line limit (`maxHeadersCount` is read when a connection is
 * assigned, too late to set it in the request's `socket` event; no option of http.request sets it),
 * and knowing, as it happens, that a request waits in the documented `agent.requests` queue.
 * Canary: test/unit/node-internals/agent-request-hook.test.ts.
 */
import type http from 'node:http';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a mixin's base takes any arguments
type AgentClass = new (...args: any[]) => http.Agent;
type AddRequest = (this: http.Agent, req: http.ClientRequest, options: http.ClientRequestArgs) => void;

/**
 * `Base` (http.Agent or https.Agent) with `requestCreated(req)` called for each request it is handed,
 * and `requestPlaced(req, options)` once the agent has given it a connection or queued it.
 */
export function withRequestHook<T extends AgentClass>(Base: T) {
  const addRequest = (Base.prototype as unknown as { addRequest?: AddRequest }).addRequest;
  if (typeof addRequest !== 'function') throw new Error('node:http Agent has no addRequest: see src/node-internals/agent-request-hook.ts');
  return class RequestHookAgent extends Base {
    /** Called with each request as it is created, before it has a connection. */
    requestCreated(_req: http.ClientRequest): void {}

    /** Called after the agent took the request: queued in `this.requests[this.getName(options)]`, or not. */
    requestPlaced(_req: http.ClientRequest, _options: http.ClientRequestArgs): void {}

    addRequest(req: http.ClientRequest, options: http.ClientRequestArgs): void {
      this.requestCreated(req);
      addRequest.call(this, req, options);
      this.requestPlaced(req, options);
    }
  };
}
