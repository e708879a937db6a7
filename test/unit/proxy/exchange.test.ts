import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { IncomingMessage } from 'node:http';
import type { Response } from 'express';
import { Exchange, ExchangeWatch, type WatchVerdict } from '../../../src/proxy/exchange.js';

/**
 * The exchange's one timer, on jest's fake clock: the deadline for the upstream's headers, then the
 * stall watch once the answer streams. The client connection is a stand-in whose counters the test
 * moves, as bytes handed to the kernel and bytes waiting for the client would.
 */
interface FakeSocket {
  bytesWritten: number;
  writableLength: number;
}

function setUp(limits: { timeoutMs: number; idleTimeoutMs: number }) {
  const verdicts: { at: number; verdict: WatchVerdict }[] = [];
  const watch = new ExchangeWatch(limits, (_exchange, verdict) => verdicts.push({ at: jest.now(), verdict }), () => jest.now());
  const socket: FakeSocket = { bytesWritten: 0, writableLength: 0 };
  const exchange = new Exchange('1', { socket } as unknown as Response, () => {}, jest.now());
  return { watch, exchange, socket, verdicts };
}

/** The upstream's headers arrived and the body streams from now. */
function streaming(watch: ExchangeWatch, exchange: Exchange): void {
  exchange.answered = true;
  exchange.proxyRes = {} as IncomingMessage;
  watch.streaming(exchange);
}

beforeEach(() => {
  jest.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('the period of the one timer', () => {
  it.each([
    [30_000, 60_000, 30_000],
    [1000, 1100, 1000],
    [30_000, 10_000, 10_000],
    [1000, 300, 250],
  ])('UPSTREAM_TIMEOUT_MS %i, STREAM_IDLE_TIMEOUT_MS %i: every %i ms, the deadline on a tick', (timeoutMs, idleTimeoutMs, periodMs) => {
    const { watch } = setUp({ timeoutMs, idleTimeoutMs });
    expect(watch.periodMs).toBe(periodMs);
    expect(timeoutMs % periodMs).toBe(0);
    expect(periodMs).toBeLessThanOrEqual(idleTimeoutMs);
  });
});

describe('before the upstream answers', () => {
  it('is the deadline at UPSTREAM_TIMEOUT_MS, not before, and only once', () => {
    const { watch, exchange, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 300 });
    watch.start(exchange);
    jest.advanceTimersByTime(999);
    expect(verdicts).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(verdicts).toEqual([{ at: 1_001_000, verdict: 'deadline' }]);
    jest.advanceTimersByTime(10_000);
    expect(verdicts).toHaveLength(1);
  });

  it('counts the deadline from when the request was forwarded, not from when the timer started', () => {
    const { watch, exchange, verdicts } = setUp({ timeoutMs: 300, idleTimeoutMs: 3000 });
    jest.advanceTimersByTime(20); // the rest of its turn of the event loop, before it is sent
    watch.start(exchange);
    jest.advanceTimersByTime(300);
    expect(verdicts).toEqual([{ at: 1_000_320, verdict: 'deadline' }]);
  });

  it('stops when the upstream answers in time: nothing streams from an answer the gateway gave itself', () => {
    const { watch, exchange, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 300 });
    watch.start(exchange);
    jest.advanceTimersByTime(400);
    exchange.answered = true; // a mapped status: answered, and no body of the upstream's streams
    jest.advanceTimersByTime(10_000);
    expect(verdicts).toEqual([]);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('once the answer streams', () => {
  it('is a stall of the upstream after STREAM_IDLE_TIMEOUT_MS of nothing, within a period more', () => {
    const { watch, exchange, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 1000 });
    watch.start(exchange);
    jest.advanceTimersByTime(100);
    streaming(watch, exchange);
    // Ticks at 1000 (quiet 900 ms) and 2000 (quiet 1900 ms): cut at the second.
    jest.advanceTimersByTime(999);
    expect(verdicts).toEqual([]);
    jest.advanceTimersByTime(1000);
    expect(verdicts).toEqual([{ at: 1_002_000, verdict: 'stalled_upstream' }]);
  });

  it('is a stall of the client when bytes wait for it', () => {
    const { watch, exchange, socket, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 1000 });
    watch.start(exchange);
    streaming(watch, exchange);
    socket.writableLength = 65536;
    jest.advanceTimersByTime(1000);
    expect(verdicts).toEqual([{ at: 1_001_000, verdict: 'stalled_client' }]);
  });

  it('keeps watching while bytes pass, and counts quiet from the last tick that saw them move', () => {
    const { watch, exchange, socket, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 1000 });
    watch.start(exchange);
    streaming(watch, exchange);
    for (let tick = 0; tick < 5; tick++) {
      socket.bytesWritten += 16_384;
      jest.advanceTimersByTime(1000);
    }
    expect(verdicts).toEqual([]);
    // Progress last seen at the tick of 5000; quiet from then: the tick of 6000 finds 1000 ms.
    jest.advanceTimersByTime(1000);
    expect(verdicts).toEqual([{ at: 1_006_000, verdict: 'stalled_upstream' }]);
  });

  it('is cleared with the response: no verdict for an exchange that is over', () => {
    const { watch, exchange, verdicts } = setUp({ timeoutMs: 1000, idleTimeoutMs: 1000 });
    watch.start(exchange);
    streaming(watch, exchange);
    clearTimeout(exchange.timer);
    jest.advanceTimersByTime(10_000);
    expect(verdicts).toEqual([]);
  });
});
