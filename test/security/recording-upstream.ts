import net from 'node:net';

/** One request as it arrived at the upstream, byte for byte. */
export interface RawRequest {
  /** The request line, e.g. `GET /v1/acquirer/eod_statements HTTP/1.1`. */
  readonly requestLine: string;
  /** Header lines in order, exactly as received. */
  readonly headerLines: readonly string[];
  /** The head, exactly as received. */
  readonly raw: string;
  /** The body, as framed by its Content-Length (the gateway frames every body it sends so). */
  readonly body: string;
}

/**
 * An upstream that stores the exact bytes of every request it receives and answers each with a
 * small 200. A body is read as its Content-Length frames it; the request is recorded once it is whole.
 */
export async function startRecordingUpstream(): Promise<{ port: number; url: string; received: RawRequest[]; close(): Promise<void> }> {
  const received: RawRequest[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      for (let end = buffer.indexOf('\r\n\r\n'); end !== -1; end = buffer.indexOf('\r\n\r\n')) {
        const raw = buffer.slice(0, end + 4);
        const [requestLine = '', ...headerLines] = raw.slice(0, -4).split('\r\n');
        const length = Number(headerLines.find((l) => /^content-length:/i.test(l))?.slice('content-length:'.length).trim() ?? 0);
        if (buffer.length < end + 4 + length) return; // the rest of the body is still to come
        const body = buffer.slice(end + 4, end + 4 + length);
        buffer = buffer.slice(end + 4 + length);
        received.push({ requestLine, headerLines, raw, body });
        socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{"upstream":1}');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    received,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Values of one header across the raw lines, name matched case-insensitively. */
export function rawHeaderValues(request: RawRequest, name: string): string[] {
  return request.headerLines
    .filter((line) => line.slice(0, line.indexOf(':')).toLowerCase() === name.toLowerCase())
    .map((line) => line.slice(line.indexOf(':') + 1).trim());
}
