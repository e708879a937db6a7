import http from 'node:http';

export interface HttpResult {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** A plain request with exactly the headers given (arrays become repeated header lines). */
export function request(
  baseUrl: string,
  path: string,
  headers: http.OutgoingHttpHeaders = {},
  method = 'GET',
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const url = new URL(baseUrl);
    const req = http.request(
      { host: url.hostname, port: url.port, path, method, headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** Header names of a response, minus those that vary per response (Date). */
export function headerNames(headers: http.IncomingHttpHeaders): string[] {
  return Object.keys(headers).filter((n) => n !== 'date').sort();
}
