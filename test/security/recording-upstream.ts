import net from 'node:net';

/** One request as it arrived at the upstream, byte for byte. */
export interface RawRequest {
  /** The request line, e.g. `GET /v1/acquirer/eod_statements HTTP/1.1`. */
  readonly requestLine: string;
  /** Header lines in order, exactly as received. */
  readonly headerLines: readonly string[];
  readonly raw: string;
}

/**
 * An upstream that stores the exact bytes of every request head it receives and answers each with
 * a small 200. The gateway only forwards requests without bodies, so a head is a whole request.
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
        buffer = buffer.slice(end + 4);
        const [requestLine = '', ...headerLines] = raw.slice(0, -4).split('\r\n');
        received.push({ requestLine, headerLines, raw });
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
