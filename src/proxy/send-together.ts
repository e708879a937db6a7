/**
 * Requests sent in one batch at most: under a flood of connections, a turn of the event loop can
 * read hundreds, and the first would wait for all of them to be judged.
 */
export const MAX_SENT_TOGETHER = 32;

/**
 * Returns `sendSoon(item)`, which sends each item either at once or with the others of its turn of
 * the event loop, once the turn's I/O callbacks are done (setImmediate).
 *
 * Why: under load one turn reads a batch of client requests, and each went upstream at the end of
 * its own read, the next request's judging in between. Each send then found the upstream asleep and
 * woke it, and a wake-up across cores is dear on a VM whose idle cores halt: it was the largest
 * single difference between the gateway and the floor (bench/RESULTS.md, nineteenth session). Sent
 * back to back, the first wakes the upstream and the others find it awake, and the upstream serves
 * them as one batch too. The price is that a request waits for the rest of its turn's I/O callbacks:
 * the other requests judged (at most MAX_SENT_TOGETHER − 1 wait), and the answers, key lookups and
 * log writes of the same turn.
 *
 * Only when the last turn that had items had more than one: under light traffic a turn holds one
 * request, which has nothing to wait for, and deferred to the turn's end it cost about a tenth of the
 * CPU per request and 0.04 ms of latency at one connection. So the first item of a turn goes at once
 * unless that last turn had several; the rest of its turn, and every item after a turn of several,
 * wait for the turn's end. (A turn without items is not seen: after a burst and a pause, the first
 * request waits for its turn's end once.)
 *
 * `send` runs once per item, in the order given, and must not throw: one that did would take the rest
 * of its batch with it.
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
