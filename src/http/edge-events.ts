import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionAnswers } from './pipelining-and-drain.js';
import { cutConnection, sendError, sendRawError } from '../errors/error-response.js';
import type { Logger } from '../observability/logger/logger.js';
import { peerText } from '../net/client-address.js';
import { declaresBody } from '../net/request-body.js';
import { countRequest } from '../observability/metrics/count-request.js';
import { bodyTimedOut } from '../plugins/request-body/read-body.js';
import { UNMATCHED_ROUTE } from '../observability/metrics/labels.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';
import { clientRequestId, loggedPath, writeAccessLine, writeAuditLine } from '../observability/access-line.js';

type RequestHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export interface HttpEdgeDeps {
  /** Judges and answers a request (the Express app). */
  readonly app: RequestHandler;
  readonly answers: ConnectionAnswers;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
}

/**
 * What the HTTP server does before a request reaches the app: refuses what Node's parser could not
 * read (400, 431), CONNECT and an unmet Expect, with the documented bodies, counted and logged like
 * any other request; and hands every request to the app once it may be answered (its connection's
 * earlier answers gone out, a declared body looked at).
 */
export function attachHttpEdge(server: http.Server, { app, answers, metrics, logger }: HttpEdgeDeps): void {
  /**
   * Requests refused before Express sees them are counted and logged like any other, with the access
   * line's fields in its order: null for what was never known (no request parsed, no time taken),
   * the client as the socket's peer.
   */
  const observeRefusal = (status: 400 | 431, code: 'BAD_REQUEST' | 'HEADERS_TOO_LARGE', requestId: string, socket: Socket, req?: http.IncomingMessage) => {
    countRequest(metrics, UNMATCHED_ROUTE, req?.method, status, code);
    const path = req?.url === undefined ? null : loggedPath(req.url);
    writeAccessLine(logger, requestId, clientRequestId(req?.headers['x-request-id']), req?.method ?? null, path, null, status, 'bad_request', code, null, null, peerText(socket), null, null, null, null);
    writeAuditLine(logger, { requestId, method: req?.method, path, route: null, status, keyId: null, acquirerId: null, client: peerText(socket), bodyBytes: null });
  };

  // CONNECT is never a route; without a listener Node would drop the connection without a word.
  server.on('connect', (req: http.IncomingMessage, socket: Socket) => {
    const requestId = randomUUID();
    observeRefusal(400, 'BAD_REQUEST', requestId, socket, req);
    sendRawError(socket, 400, requestId, answers.answerUnderWay(socket));
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // A body still being read when REQUEST_TIMEOUT_MS passed is answered 408 by its own request.
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && bodyTimedOut(socket as Socket)) return;
    // Any other reset or timed-out socket has nobody to answer; anything else is a malformed request.
    const underWay = answers.answerUnderWay(socket as Socket);
    if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return void cutConnection(socket, underWay);
    // Malformed bytes behind an answer still owed for an earlier request: written now, the error would
    // go out in that answer's place (or inside its body). The connection is cut, unanswered, and a
    // client that pipelines retries what was left (RFC 9112 §9.3.2).
    if (answers.owesEarlierAnswer(socket as Socket)) return void cutConnection(socket, underWay);
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    const requestId = randomUUID();
    observeRefusal(status, status === 431 ? 'HEADERS_TOO_LARGE' : 'BAD_REQUEST', requestId, socket as Socket);
    sendRawError(socket, status, requestId, underWay);
  });

  /**
   * Runs `handle` once the request may be answered: a pipelined request when its answer has the
   * connection (so it holds an upstream connection only while it can use it), one that declares a body
   * a turn later, once Node has said whether the body is all there (docs/request-handling.md, "Framing").
   */
  const whenAnswerable = (req: http.IncomingMessage, res: http.ServerResponse, handle: RequestHandler) => {
    if (res.socket === null) return void res.once('socket', () => whenAnswerable(req, res, handle));
    if (declaresBody(req.headers) && !req.complete) return void setImmediate(judgeUnlessRefused, req, res, handle);
    handle(req, res);
  };
  // A body that turned out malformed meanwhile has had its 400 from the parser (clientError), which
  // ended the connection: that was the request's answer, counted and logged once.
  const judgeUnlessRefused = (req: http.IncomingMessage, res: http.ServerResponse, handle: RequestHandler) => {
    if (!req.socket.writableEnded) handle(req, res);
  };
  // An Expect other than 100-continue: Node would answer an empty 417; nothing here takes a body anyway.
  const refuseExpectation = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const requestId = randomUUID();
    observeRefusal(400, 'BAD_REQUEST', requestId, req.socket, req);
    sendError(res, 400, requestId);
  };
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (answers.admit(req, res)) whenAnswerable(req, res, refuseExpectation);
  });
  // Expect: 100-continue: Node would send "100 Continue" at once, inviting the body of a request not
  // yet judged. Judged like any other, it gets its 100 once its head passes (the request-shape step)
  // or its final answer instead, which RFC 9110 §10.1.1 allows: a refusal before the client sends
  // what it was about to. One that declares no body gets its 100 at once: it invites nothing, and
  // without it Node closes the connection after the answer (the body might yet come).
  server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!declaresBody(req.headers)) res.writeContinue();
    server.emit('request', req, res);
  });
  // The usual request (not pipelined, no body) is judged at once, without a closure.
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!answers.admit(req, res)) return;
    if (res.socket === null || declaresBody(req.headers)) return void whenAnswerable(req, res, app);
    app(req, res);
  });
}
