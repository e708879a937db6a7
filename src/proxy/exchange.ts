/**
 * @module
 * One request's exchange with the upstream, and the one timer that watches it: the deadline for the
 * upstream's headers, then, once the answer streams, the stall watch. The clock is injected, so the
 * watch is tested with fake timers.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { NextFunction, Response } from 'express';

/** Kept on `res.locals.upstream` (a WeakMap would cost the collector per request). */
export class Exchange {
  /** The exchange's one timer (ExchangeWatch). */
  timer: NodeJS.Timeout | undefined = undefined;
  /** Once the answer streams: the client connection's bytes written when last looked at. */
  written = 0;
  /** Once the answer streams: when nothing was last seen to move. */
  quietSince = 0;
  proxyReq: ClientRequest | undefined = undefined;
  /** The upstream's answer, once its headers arrived and it is being passed on. */
  proxyRes: IncomingMessage | undefined = undefined;
  /** The response status is decided (upstream headers arrived, or the gateway answered with an error). */
  answered = false;
  /** The connection's bytes read when this request was given it: more at a failure means an answer had begun. */
  bytesReadAtStart = 0;
  /** Sent again once already, on a new connection (proxy/retry.ts). */
  retried = false;

  /** Names the upstream request to its pool, while it waits in the pool's queue (upstream-agent.ts). */
  readonly id: string;
  readonly res: Response;
  /** The request's own `next`, for a second attempt and for failures while sending. */
  readonly next: NextFunction;
  /** When the request was forwarded (ms, the watch's clock): its deadline counts from here. */
  readonly startedAt: number;

  constructor(id: string, res: Response, next: NextFunction, startedAt: number) {
    this.id = id;
    this.res = res;
    this.next = next;
    this.startedAt = startedAt;
  }
}

export interface WatchLimits {
  /** Time allowed until the upstream's response headers arrive. */
  readonly timeoutMs: number;
  /** Once the answer streams: nothing passing to the client for this long is a stall. */
  readonly idleTimeoutMs: number;
}

/** What a tick of the exchange's timer found. */
export type WatchVerdict = 'watching' | 'deadline' | 'stalled_client' | 'stalled_upstream' | 'done';

/** Timers fire by a clock counted in whole milliseconds: up to one early by performance.now(). */
const CLOCK_SLACK_MS = 1;

/**
 * One timer per exchange, every `periodMs`, set when the request is forwarded and cleared when the
 * response closes (one timer where there were two: docs/performance.md).
 * Progress is the client connection's bytes written, compared at each tick, so a stall is cut after
 * at least `idleTimeoutMs` and before that rounded up to whole periods plus one.
 */
export class ExchangeWatch {
  readonly #limits: WatchLimits;
  readonly #now: () => number;
  readonly #onVerdict: (exchange: Exchange, verdict: WatchVerdict) => void;
  /** The deadline falls on a tick, and a tick comes at least every idleTimeoutMs. */
  readonly periodMs: number;

  constructor(limits: WatchLimits, onVerdict: (exchange: Exchange, verdict: WatchVerdict) => void, now: () => number = () => performance.now()) {
    this.#limits = limits;
    this.#now = now;
    this.#onVerdict = onVerdict;
    this.periodMs = Math.ceil(limits.timeoutMs / Math.ceil(limits.timeoutMs / limits.idleTimeoutMs));
  }

  now(): number {
    return this.#now();
  }

  start(exchange: Exchange): void {
    exchange.timer = setTimeout(this.#tick, this.periodMs, exchange);
  }

  /** The answer's body begins to stream: quiet is counted from now. */
  streaming(exchange: Exchange): void {
    exchange.written = exchange.res.socket?.bytesWritten ?? 0;
    exchange.quietSince = this.#now();
  }

  readonly #tick = (exchange: Exchange): void => {
    const verdict = this.verdict(exchange, this.#now() + CLOCK_SLACK_MS);
    if (verdict === 'watching') exchange.timer?.refresh();
    else if (verdict !== 'done') this.#onVerdict(exchange, verdict);
  };

  /** What the exchange's state says at `now`; records progress seen since the last look. */
  verdict(exchange: Exchange, now: number): WatchVerdict {
    if (!exchange.answered) return now - exchange.startedAt < this.#limits.timeoutMs ? 'watching' : 'deadline';
    const socket = exchange.res.socket;
    // Answered by the gateway itself (an error, a mapped status), or already finished: nothing streams.
    if (exchange.proxyRes === undefined || socket === null) return 'done';
    if (socket.bytesWritten !== exchange.written) {
      exchange.written = socket.bytesWritten;
      exchange.quietSince = now;
    }
    if (now - exchange.quietSince < this.#limits.idleTimeoutMs) return 'watching';
    // Bytes waiting for the client: it stopped reading. None: the upstream stopped sending.
    return socket.writableLength > 0 ? 'stalled_client' : 'stalled_upstream';
  }
}
