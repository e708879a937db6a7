/**
 * @module
 * The keep-alive pool of connections to the upstream, as a subclass of Node's agent: each request it
 * is handed reads at most one header line past MAX_UPSTREAM_HEADER_LINES, bytes the upstream sends
 * on an idle pooled connection (an answer to no request) are reported, and a request queued for a
 * connection is kept by its exchange, so that its deadline or its client's leaving can cancel it.
 */
import http, { type ClientRequest } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { EXCHANGE_HEADER } from '../net/header-names.js';
import { withRequestHook } from '../node-internals/agent-request-hook.js';

/**
 * Header lines of an upstream answer, at most. Past the parser's limit Node drops the rest unseen
 * while its parser still acts on them, so the limit is one line more and an answer that reaches it
 * is refused (proxy/answer.ts).
 */
export const MAX_UPSTREAM_HEADER_LINES = 2000;

export interface UpstreamAgentOptions {
  /** UPSTREAM_MAX_SOCKETS. */
  readonly maxSockets: number;
  /** An idle pooled connection closed having read `bytes` that no request asked for. */
  readonly onUnaskedBytes?: (bytes: number) => void;
  /** Name resolution other than the system's (tests fake it). */
  readonly lookup?: http.AgentOptions['lookup'];
}

/** On a pooled connection while it is idle: its bytes read when it was put back in the pool. */
const READ_WHEN_IDLE = Symbol('bytes read when the connection went idle');
type PooledSocket = Duplex & { bytesRead: number; [READ_WHEN_IDLE]?: number };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a mixin's base takes any arguments
function upstreamAgentClass<T extends new (...args: any[]) => http.Agent>(Base: T) {
  return class UpstreamAgent extends withRequestHook(Base) {
    readonly #onIdleClose: (this: PooledSocket) => void;
    /** Requests waiting in the pool's queue, by exchange: only while the pool is exhausted. */
    readonly #waiting = new Map<string, ClientRequest>();

    constructor(...[options]: [UpstreamAgentOptions]) {
      const maxSockets = options.maxSockets;
      super({ keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 256), scheduling: 'lifo', ...(options.lookup && { lookup: options.lookup }) });
      const onUnasked = options.onUnaskedBytes;
      // One listener function for every connection, not a closure per request.
      this.#onIdleClose = function (this: PooledSocket) {
        const unasked = this.bytesRead - (this[READ_WHEN_IDLE] ?? this.bytesRead);
        if (unasked !== 0) onUnasked?.(unasked);
      };
    }

    override requestCreated(req: ClientRequest): void {
      // One line past the limit is kept, so that an answer longer than it is seen and refused.
      req.maxHeadersCount = MAX_UPSTREAM_HEADER_LINES + 1;
    }

    /**
     * The exchange's header comes off before anything is written; a request the pool queued is kept
     * by its exchange until it has a connection.
     */
    override requestPlaced(req: ClientRequest): void {
      const exchange = req.getHeader(EXCHANGE_HEADER);
      if (exchange === undefined) return;
      if (!req.headersSent) req.removeHeader(EXCHANGE_HEADER);
      if (typeof exchange !== 'string' || !this.#queued(req)) return;
      this.#waiting.set(exchange, req);
      req.once('socket', () => this.#waiting.delete(exchange));
    }

    /** Whether `req` was just queued: last in one of the pool's queues (one origin, so one queue). */
    #queued(req: ClientRequest): boolean {
      for (const name in this.requests) {
        const queue = this.requests[name];
        if (queue !== undefined && queue[queue.length - 1] === req) return true;
      }
      return false;
    }

    /** The request of `exchange` while it waits in the pool's queue, handed over once (to be cancelled). */
    takeWaiting(exchange: string): ClientRequest | undefined {
      const req = this.#waiting.get(exchange);
      if (req !== undefined) this.#waiting.delete(exchange);
      return req;
    }

    /**
     * Node's parser takes bytes on an idle connection for a second answer to its last request and
     * closes it without a word; a connection that closes while idle having read more than it had
     * is such a fault (an upstream closing an idle connection sends nothing).
     */
    override keepSocketAlive(socket: PooledSocket): boolean {
      const kept = super.keepSocketAlive(socket) as unknown as boolean;
      if (kept) {
        socket[READ_WHEN_IDLE] = socket.bytesRead;
        socket.on('close', this.#onIdleClose);
      }
      return kept;
    }

    override reuseSocket(socket: PooledSocket, req: ClientRequest): void {
      socket.off('close', this.#onIdleClose);
      super.reuseSocket(socket, req);
    }

    /**
     * Closes the idle connections. When the upstream closed one, those idle longer are closed or
     * closing too (the pool hands out the most recent first): a second attempt must not meet one.
     */
    dropIdleConnections(): void {
      for (const sockets of Object.values(this.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
    }
  };
}

const UpstreamHttpAgent = upstreamAgentClass(http.Agent);
const UpstreamHttpsAgent = upstreamAgentClass(https.Agent);

/** What the proxy uses of its pool beyond Node's agent. */
export interface UpstreamAgent extends http.Agent {
  dropIdleConnections(): void;
  takeWaiting(exchange: string): ClientRequest | undefined;
}

/** The pool for `target`'s scheme. */
export function createUpstreamAgent(target: URL, options: UpstreamAgentOptions): UpstreamAgent {
  return target.protocol === 'https:' ? new UpstreamHttpsAgent(options) : new UpstreamHttpAgent(options);
}
