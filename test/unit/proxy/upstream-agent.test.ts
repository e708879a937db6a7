import http from 'node:http';
import { EXCHANGE_HEADER } from '../../../src/net/header-names.js';
import { createUpstreamAgent } from '../../../src/proxy/upstream-agent.js';
import { startUpstream, type RecordingUpstream } from '../../helpers/upstream.js';
import { waitFor } from '../../helpers/wait.js';

/** The pool on its own: what it keeps of a request that waits for a connection, and what it sends. */
let upstream: RecordingUpstream;

beforeEach(async () => {
  upstream = await startUpstream();
});

afterEach(async () => {
  await upstream.close();
});

function send(agent: http.Agent, path: string, exchange: string): { req: http.ClientRequest; done: Promise<number | string> } {
  let req!: http.ClientRequest;
  const done = new Promise<number | string>((resolve) => {
    req = http.get(`${upstream.url}${path}`, { agent, headers: { [EXCHANGE_HEADER]: exchange } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', (err) => resolve(err.message));
  });
  return { req, done };
}

describe('the upstream pool', () => {
  it('hands over a request that waits for a connection, once, by its exchange, and never sends it', async () => {
    const agent = createUpstreamAgent(new URL(upstream.url), { maxSockets: 1 });
    let release = () => {};
    upstream.handle((req, res) => (release = () => res.end(req.url)));
    const first = send(agent, '/first', 'e1');
    const second = send(agent, '/second', 'e2');
    // The first has the one connection: it is not waiting, and is not handed over.
    expect(agent.takeWaiting('e1')).toBeUndefined();
    const waiting = agent.takeWaiting('e2');
    expect(waiting).toBe(second.req);
    expect(agent.takeWaiting('e2')).toBeUndefined();
    waiting!.destroy();
    await waitFor(() => upstream.received.length === 1, { what: 'the first request upstream' });
    release();
    expect(await first.done).toBe(200);
    expect(await second.done).toEqual(expect.any(String));
    expect(upstream.received.map((r) => r.url)).toEqual(['/first']);
    agent.destroy();
  });

  it('forgets a waiting request once it has a connection, and takes the exchange header off every request', async () => {
    const agent = createUpstreamAgent(new URL(upstream.url), { maxSockets: 1 });
    const first = send(agent, '/first', 'e1');
    const second = send(agent, '/second', 'e2');
    const handedOverOnceConnected = new Promise((resolve) => second.req.once('socket', () => resolve(agent.takeWaiting('e2'))));
    expect([await first.done, await second.done]).toEqual([200, 200]);
    expect(await handedOverOnceConnected).toBeUndefined();
    for (const { headers } of upstream.received) expect(headers[EXCHANGE_HEADER]).toBeUndefined();
    expect(upstream.received).toHaveLength(2);
    agent.destroy();
  });
});
