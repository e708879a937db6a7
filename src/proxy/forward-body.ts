import type { Readable } from 'node:stream';

/** The side an answer goes to: a ServerResponse, or any writable stream. */
export type BodySink = Pick<NodeJS.WritableStream, 'write' | 'end' | 'on'> & { readonly destroyed: boolean };

/**
 * Passes the upstream's body to the client as it arrives, holding the upstream back while the
 * client's connection is full: `pipe()` without its per-answer listeners (docs/performance.md).
 * `head` is called once before the first byte or the end, while a failure can still be answered in
 * full; it returns false when it answered otherwise (and stopped the body).
 */
export function forwardBody(body: Readable, res: BodySink, head: () => boolean = () => true): void {
  let resume: (() => void) | undefined;
  let headed = false;
  body.on('data', (chunk: Buffer) => {
    if (!headed && !(headed = head())) return;
    if (res.write(chunk)) return;
    body.pause();
    // Made once, at the first full connection: a small answer never fills one.
    if (resume === undefined) res.on('drain', (resume = () => body.resume()));
  });
  // Not once the answer was cut: an upstream that reset a body framed by its connection alone has
  // its body ended there by Node's parser, and an end after the cut would count the answer as whole.
  body.on('end', () => {
    if (res.destroyed) return;
    if (!headed && !(headed = head())) return;
    res.end();
  });
}
