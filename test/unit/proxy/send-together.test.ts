import { createSendTogether, MAX_SENT_TOGETHER } from '../../../src/proxy/send-together.js';

/** Resolves after the immediates queued before it: the end of the current turn's I/O callbacks. */
const turnEnd = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A sender that records what it sent, and the sender's `sendSoon`. */
function recorded(max?: number) {
  const sent: string[] = [];
  const sendSoon = createSendTogether((item: string) => sent.push(item), max);
  return { sent, sendSoon };
}

describe('createSendTogether', () => {
  it('light traffic, one item a turn: each is sent at once', async () => {
    const { sent, sendSoon } = recorded();
    for (const item of ['a', 'b', 'c']) {
      sendSoon(item);
      expect(sent.at(-1)).toBe(item);
      await turnEnd();
    }
    expect(sent).toEqual(['a', 'b', 'c']);
  });

  it('a turn of several: the first goes at once, the others together once the turn is done (not in its microtasks)', async () => {
    const { sent, sendSoon } = recorded();
    sendSoon('a');
    sendSoon('b');
    sendSoon('c');
    expect(sent).toEqual(['a']);
    await Promise.resolve();
    expect(sent).toEqual(['a']);
    await turnEnd();
    expect(sent).toEqual(['a', 'b', 'c']);
  });

  it('after a turn of several, every item of the next turn waits for its end, the first too; after a turn of one, items go at once again', async () => {
    const { sent, sendSoon } = recorded();
    sendSoon('a');
    sendSoon('b');
    await turnEnd();
    sendSoon('c');
    expect(sent).toEqual(['a', 'b']);
    await turnEnd();
    expect(sent).toEqual(['a', 'b', 'c']);
    sendSoon('d');
    expect(sent).toEqual(['a', 'b', 'c', 'd']);
  });

  it('sends what waits at once when `max` items wait, and what comes after in the same turn at its end', async () => {
    const { sent, sendSoon } = recorded(3);
    sendSoon('a');
    sendSoon('b');
    sendSoon('c');
    expect(sent).toEqual(['a']);
    sendSoon('d');
    expect(sent).toEqual(['a', 'b', 'c', 'd']);
    sendSoon('e');
    expect(sent).toEqual(['a', 'b', 'c', 'd']);
    await turnEnd();
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('an item given while a batch is being sent does not join it: it belongs to the next turn', async () => {
    const sent: string[] = [];
    const sendSoon = createSendTogether((item: string) => {
      sent.push(item);
      if (item === 'c') sendSoon('late');
    });
    sendSoon('a');
    sendSoon('b');
    await turnEnd();
    sendSoon('c');
    sendSoon('d');
    await turnEnd();
    // The turn before had two items: 'late', the first of its turn, waits for that turn's end.
    expect(sent).toEqual(['a', 'b', 'c', 'd']);
    await turnEnd();
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'late']);
  });

  it('batches hold MAX_SENT_TOGETHER at most by default', () => {
    const { sent, sendSoon } = recorded();
    sendSoon('first');
    for (let i = 1; i < MAX_SENT_TOGETHER; i++) sendSoon(String(i));
    expect(sent).toEqual(['first']);
    sendSoon('last');
    expect(sent).toHaveLength(MAX_SENT_TOGETHER + 1);
  });
});
