import type { Readable } from 'node:stream';

/** The side an answer goes to: a ServerResponse, or any writable stream. */
export type BodySink = Pick<NodeJS.WritableStream, 'write' | 'end' | 'on'> & { readonly destroyed: boolean };

/**
 * Passes the upstream's body to the client as it arrives, and holds the upstream back while the
 * client's connection is full. What `body.pipe(res)` does, without what a proxy never needs from it
 * (an unpipe path, a 'pipe' event, and eight listeners added and removed for each answer): pipe()
 * was 9% of the main thread's time per proxied request (bench/RESULTS.md, 2026-11-24). A client
 * that goes away or an upstream that fails is httpxy's to handle: it destroys the other side, and no
 * more data comes.
 * `head` is called once, before the first byte of the body or its end, whichever comes first: until
 * then nothing of the answer is committed, and an upstream that fails can still be answered in full.
 * It returns false when it answered otherwise (and stopped the body).
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
