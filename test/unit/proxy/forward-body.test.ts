import { PassThrough, Writable } from 'node:stream';
import { forwardBody } from '../../../src/proxy/forward-body.js';

/** A client connection that takes one chunk, then nothing until `accept()` is called for it. */
function slowClient() {
  const received: Buffer[] = [];
  const waiting: (() => void)[] = [];
  let ended = false;
  const sink = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, done) {
      received.push(chunk);
      waiting.push(done);
    },
    final(done) {
      ended = true;
      done();
    },
  });
  return {
    sink,
    received,
    ended: () => ended,
    /** Lets the client take what it has been given so far. */
    acceptAll() {
      for (const done of waiting.splice(0)) done();
    },
    pending: () => waiting.length,
  };
}

const chunk = (i: number) => Buffer.from(`chunk ${i};`);

describe('forwardBody', () => {
  it('holds the upstream back while the client is full, then passes everything in order and ends', async () => {
    const body = new PassThrough();
    const client = slowClient();
    forwardBody(body, client.sink);
    for (let i = 0; i < 50; i++) body.write(chunk(i));
    body.end();
    await new Promise(setImmediate);
    // The client took one chunk and said it was full: the upstream's body stops flowing.
    expect(client.received).toHaveLength(1);
    expect(body.isPaused()).toBe(true);
    expect(body.readableLength).toBeGreaterThan(0);
    expect(client.ended()).toBe(false);
    // Each time the client catches up the body flows again, until all of it has passed.
    const deadline = Date.now() + 5000;
    while (!client.ended()) {
      if (Date.now() > deadline) throw new Error(`not ended: ${client.received.length} chunks passed`);
      client.acceptAll();
      await new Promise(setImmediate);
    }
    expect(Buffer.concat(client.received).toString()).toBe(Array.from({ length: 50 }, (_, i) => chunk(i).toString()).join(''));
  });

  it('passes a body that never fills the client at once and ends the response', async () => {
    const body = new PassThrough();
    const received: string[] = [];
    const finished = new Promise<void>((resolve) => {
      const sink = new Writable({
        write(c: Buffer, _e, done) {
          received.push(c.toString());
          done();
        },
      });
      sink.on('finish', resolve);
      forwardBody(body, sink);
    });
    body.end('{"eod_statements":[]}');
    await finished;
    expect(received).toEqual(['{"eod_statements":[]}']);
  });

  it('ends an empty body (a 204, a HEAD) without writing', async () => {
    const body = new PassThrough();
    const client = slowClient();
    forwardBody(body, client.sink);
    body.end();
    const deadline = Date.now() + 5000;
    while (!client.ended()) {
      if (Date.now() > deadline) throw new Error('not ended');
      await new Promise(setImmediate);
    }
    expect(client.received).toEqual([]);
  });

  it('calls head once, before the first byte, and not at all for a body that fails before any', async () => {
    const events: string[] = [];
    const sink = new Writable({
      write(c: Buffer, _e, done) {
        events.push(`write ${c.toString()}`);
        done();
      },
    });
    const finished = new Promise((resolve) => sink.on('finish', resolve));
    const body = new PassThrough();
    forwardBody(body, sink, () => (events.push('head'), true));
    body.write('a');
    body.end('b');
    await finished;
    expect(events).toEqual(['head', 'write a', 'write b']);

    const failing = new PassThrough();
    const heads: string[] = [];
    forwardBody(failing, new Writable({ write: (_c, _e, done) => done() }), () => (heads.push('head'), true));
    failing.on('error', () => {});
    failing.destroy(new Error('aborted'));
    await new Promise(setImmediate);
    expect(heads).toEqual([]);
  });

  it('calls head at the end of an empty body, and passes nothing once head answered otherwise', async () => {
    const empty = new PassThrough();
    const events: string[] = [];
    const sink = new Writable({ write: (_c, _e, done) => done() });
    const finished = new Promise((resolve) => sink.on('finish', resolve));
    forwardBody(empty, sink, () => (events.push('head'), true));
    empty.end();
    await finished;
    expect(events).toEqual(['head']);

    const refused = new PassThrough();
    const client = slowClient();
    forwardBody(refused, client.sink, () => (refused.destroy(), false));
    refused.write('rows');
    await new Promise(setImmediate);
    expect(client.received).toEqual([]);
    expect(client.ended()).toBe(false);
  });
});
