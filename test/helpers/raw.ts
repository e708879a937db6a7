import net from 'node:net';

/** Whether `raw` holds a whole response with a Content-Length framed body. */
function complete(raw: string): boolean {
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) return false;
  const length = /\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end));
  return length !== null && raw.length - end - 4 >= Number(length[1]);
}

/**
 * Sends raw bytes and returns what the server wrote: up to the end of the first complete response,
 * or until the server closes or goes quiet for `idleMs`.
 */
export function sendRaw(port: number, bytes: string | Buffer, { idleMs = 1000 } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(idleMs, () => socket.end());
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      if (complete(received)) socket.end();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.write(bytes);
  });
}

/**
 * Sends raw bytes and resolves with everything the server wrote, once the server closed the
 * connection (the test's timeout if it never does); rejects on a reset.
 */
export function sendUntilServerCloses(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
    socket.write(bytes);
  });
}

/** A raw connection whose bytes are collected, and how it ended: `'end'` for a clean close, else the error's code (`ECONNRESET`). */
export interface RawConnection {
  readonly socket: net.Socket;
  received(): string;
  readonly ending: Promise<string>;
}

export function openRaw(port: number): RawConnection {
  const socket = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  const ending = new Promise<string>((resolve) => {
    socket.on('end', () => resolve('end'));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
  socket.on('data', (d: Buffer) => chunks.push(d));
  return { socket, received: () => Buffer.concat(chunks).toString('latin1'), ending };
}

/** Status, headers (lower-case names) and body of the first response in `raw`. */
export function parseRawResponse(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const end = raw.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  return { status: Number(statusLine.split(' ')[1]), headers, body: raw.slice(end + 4, end + 4 + length) };
}

/**
 * Every response in `raw`, in order, each read as parseRawResponse reads the first; a chunked body
 * is decoded (and must be whole).
 */
export function parseRawResponses(raw: string): ReturnType<typeof parseRawResponse>[] {
  const responses: ReturnType<typeof parseRawResponse>[] = [];
  let rest = raw;
  while (rest.includes('\r\n\r\n')) {
    const response = parseRawResponse(rest);
    rest = rest.slice(rest.indexOf('\r\n\r\n') + 4);
    if (response.headers['transfer-encoding'] === 'chunked') {
      response.body = '';
      for (;;) {
        const size = parseInt(rest, 16);
        if (Number.isNaN(size)) throw new Error(`not a chunk: ${JSON.stringify(rest.slice(0, 40))}`);
        rest = rest.slice(rest.indexOf('\r\n') + 2);
        response.body += rest.slice(0, size);
        rest = rest.slice(size + 2);
        if (size === 0) break;
      }
    } else {
      rest = rest.slice(response.body.length);
    }
    responses.push(response);
  }
  return responses;
}
