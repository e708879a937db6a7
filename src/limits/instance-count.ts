import type { Cluster, Redis } from 'ioredis';

/** How often each instance says it is alive, and how long one that stopped saying so is still counted. */
export const ANNOUNCE_EVERY_MS = 2_000;
export const ANNOUNCEMENT_EXPIRY_MS = 6_000;

/**
 * Adds this instance to the set of live ones (KEYS[1], scored by Redis's clock), drops those not
 * heard from within ARGV[2] ms, and returns how many are left. The set expires with the last one.
 */
export const ANNOUNCE_SCRIPT = `local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('ZCARD', KEYS[1])`;

type AnnounceCommand = (key: string, id: string, expiryMs: string) => Promise<number>;

export interface InstanceCountOptions {
  readonly client: Redis | Cluster;
  /** The set of live instances: `<REDIS_KEY_PREFIX>instances`. */
  readonly key: string;
  /** This instance's own name in it (random per process). */
  readonly id: string;
  /** Each count read (also when it did not change). */
  readonly onCount: (count: number) => void;
  readonly onError: (err: unknown) => void;
}

/**
 * The gateways live now, as announced in Redis, read in the background (never on a request's path).
 * Until the first answer, and while Redis does not answer, the last count stands (1 at first). It
 * announces as the connection turns ready, and again at each reconnection: a Redis that restarted
 * empty learns of every instance within one interval.
 */
export class InstanceCount {
  #count = 1;
  readonly #announce: AnnounceCommand;
  readonly #options: InstanceCountOptions;
  readonly #timer: NodeJS.Timeout;
  readonly #onReady = () => void this.#tick();
  #left = false;
  #leaving: Promise<void> | undefined;

  constructor(options: InstanceCountOptions) {
    this.#options = options;
    options.client.defineCommand('acquirerGatewayAnnounce', { numberOfKeys: 1, lua: ANNOUNCE_SCRIPT });
    this.#announce = (options.client as unknown as { acquirerGatewayAnnounce: AnnounceCommand }).acquirerGatewayAnnounce.bind(options.client);
    this.#timer = setInterval(() => void this.#tick(), ANNOUNCE_EVERY_MS);
    this.#timer.unref();
    // Not before: the connection queues nothing, and a command sent while it connects fails.
    options.client.on('ready', this.#onReady);
    if (options.client.status === 'ready') void this.#tick();
  }

  readonly get = (): number => this.#count;

  async #tick(): Promise<void> {
    try {
      const count = await this.#announce(this.#options.key, this.#options.id, String(ANNOUNCEMENT_EXPIRY_MS));
      // Left meanwhile: the announcement just made is taken back.
      if (this.#left) return void (await this.#remove());
      this.#count = Math.max(1, count);
      this.#options.onCount(this.#count);
    } catch (err) {
      if (!this.#left) this.#options.onError(err);
    }
  }

  /**
   * Leaves the set, as the gateway starts draining: the others count one fewer at their next reading
   * rather than after the expiry, and a drain of SHUTDOWN_TIMEOUT_MS does not hold their shares down.
   */
  leave(): Promise<void> {
    this.#left = true;
    clearInterval(this.#timer);
    this.#options.client.off('ready', this.#onReady);
    // Once: a close after the drain waits for the removal the drain's start sent.
    return (this.#leaving ??= this.#remove());
  }

  async #remove(): Promise<void> {
    await this.#options.client.zrem(this.#options.key, this.#options.id).catch(() => {});
  }
}
