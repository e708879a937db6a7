import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the upstream saw it. */
export interface ReceivedRequest {
  readonly method: string;
  /** The request-target exactly as it arrived. */
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  /** Names and values in arrival order, duplicates kept. */
  readonly rawHeaders: readonly string[];
  /** The body's bytes received so far. */
  body(): Buffer;
  /** Settles when the request's body has all arrived (or its connection closed first). */
  readonly bodyEnded: Promise<void>;
}

export type UpstreamHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A real HTTP upstream on an ephemeral port that records every request it receives. */
export interface RecordingUpstream {
  readonly url: string;
  readonly port: number;
  readonly received: ReceivedRequest[];
  /** TCP connections accepted so far (a request may open one without ever completing its head). */
  readonly connections: () => number;
  /** Replaces how the upstream answers (default: 200 JSON echo of the target). */
  handle(handler: UpstreamHandler): void;
  /** Values of a header across all raw header lines, matched case-insensitively. */
  close(): Promise<void>;
}

export function headerValues(rawHeaders: readonly string[], name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === name.toLowerCase()) values.push(rawHeaders[i + 1]!);
  }
  return values;
}

/** An empty statement list, as the list route answers with none. */
export const emptyStatementList: UpstreamHandler = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': '21' });
  res.end('{"eod_statements":[]}');
};

const defaultHandler: UpstreamHandler = (req, res) => {
  const body = JSON.stringify({ upstream: true, url: req.url });
  res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': 'yes' });
  res.end(body);
};

export async function startUpstream(): Promise<RecordingUpstream> {
  const received: ReceivedRequest[] = [];
  let handler = defaultHandler;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    const bodyEnded = new Promise<void>((resolve) => {
      req.on('end', resolve);
      req.on('close', resolve);
    });
    received.push({ method: req.method!, url: req.url!, headers: req.headers, rawHeaders: [...req.rawHeaders], body: () => Buffer.concat(chunks), bodyEnded });
    handler(req, res);
  });
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    connections: () => connections,
    handle(next) {
      handler = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
