import type http from 'node:http';
import type { Socket } from 'node:net';
import { cutConnection } from '../errors/error-response.js';
import { declaresBody } from '../net/request-body.js';
import type { IdleAwareServer } from '../node-internals/idle-connections.js';
import { closeAfterAnswer } from '../node-internals/outgoing-message.js';

/**
 * Requests one connection may have waiting behind the answers before them. An HTTP/1.1 client that
 * pipelines at all (browsers do not) keeps a handful in flight; past this the connection is closed.
 */
export const MAX_PIPELINED_REQUESTS = 32;
/** A connection's responses not yet finished, in the order they go out. */
const PENDING = Symbol('responses not yet finished');
/** `bytesRead` when its latest request was taken: anything read since is the start of another. */
const READ_AT_REQUEST = Symbol('bytes read when the latest request was taken');
type TrackedSocket = Socket & { [PENDING]?: http.ServerResponse[]; [READ_AT_REQUEST]?: number };

/**
 * A connection that owes no answer, has nothing left to write, and has read nothing of a request not
 * yet taken (a head half-received): closing it loses nothing. A request's body read after it was
 * taken also counts as something read: such a connection is left to its keep-alive timeout.
 */
export function isIdle(socket: Socket): boolean {
  const s = socket as TrackedSocket;
  if (socket.writableLength !== 0) return false;
  // Ended by the gateway (a refusal written raw, CONNECT): whatever it reads from now on is ignored.
  if (socket.writableEnded) return true;
  return (s[PENDING]?.length ?? 0) === 0 && socket.bytesRead === (s[READ_AT_REQUEST] ?? 0);
}

export interface ConnectionAnswers {
  /**
   * Takes a request onto its connection's queue of answers, before anything answers it; false when
   * it is not to be answered at all.
   */
  admit(req: http.IncomingMessage, res: http.ServerResponse): boolean;
  /**
   * Whether a parse error on this connection comes behind an answer owed for another request. Not
   * when the one answer owed is for the request whose own body is malformed: that request is owed
   * its 400.
   */
  owesEarlierAnswer(socket: Socket): boolean;
  /** The answer the connection is writing or will write next, if any: the oldest not yet finished. */
  answerUnderWay(socket: Socket): http.ServerResponse | undefined;
  /**
   * From now on, the last answer still to start on each connection says `Connection: close`, and
   * connections close once idle (`server.close()` closes the idle ones of the moment).
   */
  drain(): void;
  /** Cuts every open connection: an answer under way is cut as any other cut short. */
  cutAll(): void;
}

/**
 * Keeps, for every connection of `server`, the answers it owes in order: what the pipelining limit
 * counts, what a parse error must not jump ahead of, and what the drain waits for. The server's idle
 * connections are the ones whose answers are all written (isIdle).
 */
export function trackConnectionAnswers(server: IdleAwareServer, onPipelineLimit: (socket: Socket) => void): ConnectionAnswers {
  let draining = false;
  const connections = new Set<TrackedSocket>();
  server.on('connection', (socket: TrackedSocket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  // Idle: every answer on it finished, its bytes all handed to the kernel (why not Node's own check:
  // node-internals/idle-connections.ts).
  server.closeIdle = () => {
    for (const socket of connections) if (isIdle(socket)) socket.destroy();
  };
  const underWay = (socket: Socket) => (socket as TrackedSocket)[PENDING]?.[0];
  /**
   * While draining, the last answer still to start on a connection says `Connection: close`, so the
   * client is told before it sends another request. Only the last: Node drops the answers queued
   * behind a closing one. (A client that pipelines retries what a closed connection left unanswered.)
   */
  const closeAfterLast = (pending: readonly http.ServerResponse[]) => {
    const last = pending.at(-1);
    if (last !== undefined && !last.headersSent) closeAfterAnswer(last);
  };
  // One listener function for every response, not a closure per request (nor a second listener):
  // the answer is taken off its connection's queue (answers finish in the order they were asked),
  // and while draining, connections close once they are idle. An answer that never finishes
  // (the client left) needs no taking off: its connection and queue are gone.
  function responseDone(this: http.ServerResponse) {
    (this.req.socket as TrackedSocket)[PENDING]!.shift();
    if (draining) setImmediate(() => server.closeIdleConnections());
  }
  return {
    // Node parses pipelined requests as fast as they arrive and queues each behind the answers before
    // it, with nothing written to push back: one connection with a valid key could queue 150,000
    // (730 MiB, and a 25 s stall for everyone when they were dropped). Past MAX_PIPELINED_REQUESTS
    // the connection is closed.
    admit(req, res) {
      const socket = req.socket as TrackedSocket;
      // The rest of a flood parsed from the same read as the request that closed the connection.
      if (socket.destroyed) return false;
      res.on('finish', responseDone);
      socket[READ_AT_REQUEST] = socket.bytesRead;
      // A body read after its head: what it brings is this request's, not the start of another.
      if (!req.complete && declaresBody(req.headers)) {
        req.once('end', () => (socket[READ_AT_REQUEST] = socket.bytesRead));
      }
      const pending = (socket[PENDING] ??= []);
      pending.push(res);
      if (draining) closeAfterLast(pending);
      if (pending.length > MAX_PIPELINED_REQUESTS) {
        onPipelineLimit(socket);
        cutConnection(socket, underWay(socket));
        return false;
      }
      return true;
    },
    // (A request that declares no body is handed over ended: its `complete` says nothing.)
    owesEarlierAnswer(socket) {
      const pending = (socket as TrackedSocket)[PENDING] ?? [];
      if (pending.length !== 1) return pending.length > 1;
      const req = pending[0]!.req;
      return !(declaresBody(req.headers) && !req.complete);
    },
    answerUnderWay: underWay,
    drain() {
      draining = true;
      for (const socket of connections) closeAfterLast(socket[PENDING] ?? []);
    },
    cutAll() {
      for (const socket of connections) cutConnection(socket, underWay(socket));
    },
  };
}
