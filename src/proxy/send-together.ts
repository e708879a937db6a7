/**
 * Requests sent in one batch at most: under a flood of connections, a turn of the event loop can
 * read hundreds, and the first would wait for all of them to be judged.
 */
export const MAX_SENT_TOGETHER = 32;

/**
 * Returns `sendSoon(item)`: at once, or, when the last turn of the event loop that had items had more
 * than one, with the others of its turn at its end, back to back, so that the first wakes the upstream
 * and the others find it awake (docs/performance.md). `send` runs once per item, in order, and must
 * not throw: one that did would take the rest of its batch with it.
 */
export function createSendTogether<T>(send: (item: T) => void, max = MAX_SENT_TOGETHER): (item: T) => void {
  let queued: T[] = [];
  /** Items given this turn, sent at once or queued. */
  let thisTurn = 0;
  /** The last turn had more than one: traffic enough for its requests to be sent together. */
  let busy = false;
  const sendQueued = (): void => {
    const batch = queued;
    queued = [];
    for (const item of batch) send(item);
  };
  const endOfTurn = (): void => {
    busy = thisTurn > 1;
    thisTurn = 0;
    sendQueued();
  };
  return function sendSoon(item) {
    if (thisTurn++ === 0) {
      setImmediate(endOfTurn);
      if (!busy) return send(item);
    }
    queued.push(item);
    if (queued.length >= max) sendQueued();
  };
}
