import net from 'node:net';

/** Sends raw bytes and returns everything the server wrote until it closed or went quiet. */
export function sendRaw(port: number, bytes: string | Buffer, { idleMs = 1000 } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(idleMs, () => socket.end());
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(received));
    socket.write(bytes);
  });
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
