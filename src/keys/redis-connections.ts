/**
 * @module
 * The key store's two Redis connections (commands, and change notices) and what they say of the
 * store's health. Gateways fail fast rather than queue: no offline queue, a command timeout, and
 * reconnection forever with a short back-off, so an outage costs a 503 and recovery needs nobody.
 * In Cluster mode commands go through a Cluster client, and notices through one node at a time.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS, DEFAULT_REDIS_HEALTH_CHECK_INTERVAL_MS } from '../config/defaults.js';
import type { KeyStoreEvent } from './key-store.js';
import { clusterSubscribers, openCluster, primaryServing, subscriberCandidates } from './redis-cluster.js';
import type { RedisTarget } from './redis-target.js';

const RECONNECT_MAX_DELAY_MS = 1000;

export interface RedisConnectionOptions {
  /** Where Redis is: a URL, or Sentinels (redis-target.ts). */
  readonly target: RedisTarget;
  /** Commands that get no reply within this time reject; keeps a black-holed Redis from stalling requests. */
  readonly commandTimeoutMs?: number;
  /** The channel of change notices to subscribe to (gateways); none for key administration, which only publishes. */
  readonly channel?: (db: number) => string;
  /** Key administration: wait for the connection instead of failing at once, then give up. */
  readonly waitForConnection?: boolean;
  /**
   * Gateways: the store's change counter (in its slot in a Cluster), read by each health check and
   * passed to `onVersion`: a change whose notice never arrived shows there.
   */
  readonly versionKey?: string;
  readonly onVersion?: (version: number) => void;
  /** Gateways: ping both connections this often and reconnect one that does not answer. */
  readonly healthCheckIntervalMs?: number;
  /** Told about connection and subscription failures (never about a missing key). */
  readonly onError?: (err: unknown, context: string) => void;
  /** Health changes, resyncs, and each notice's message. */
  readonly onEvent: (event: KeyStoreEvent | { readonly type: 'message'; readonly message: string }) => void;
}

export class RedisConnections {
  readonly client: Redis | Cluster;
  /** Replaced in Cluster mode each time its node is lost (#openClusterSubscriber). */
  #subscriber: Redis | undefined;
  /** Cluster mode: which candidate node the next subscriber tries, and how many have failed in a row. */
  #clusterAttempt = { next: 0, failures: 0 };
  #closing = false;
  readonly #options: RedisConnectionOptions;
  #health: { available: boolean; notices: boolean } = { available: false, notices: false };
  #subscribed = false;
  /**
   * Why the SELECT of REDIS_URL's database failed on the latest connect (`ERR DB index is out of
   * range`), if it did. ioredis reports it and goes on to "ready" on database 0, where the keys
   * are another set (another environment's, where environments share a Redis by database).
   */
  #databaseRefused: Error | undefined;
  /** The main connection has been ready once. */
  #connectedOnce = false;
  /** Why the main connection last failed (refused, a wrong password): a failed connect says only that it closed. */
  #connectionFailure: Error | undefined;
  /** Cluster mode: why a node last failed (refused, a wrong password), which the Cluster's own error does not say. */
  #nodeFailure: Error | undefined;
  /**
   * Connections whose health-check PING went unanswered, until they are ready again: down from that
   * moment. The reconnect that follows reports nothing until the socket closes, and ioredis gives a
   * socket it ends up to 2 s to close, cached keys trusted all the while.
   */
  readonly #unanswered = new Set<Redis | Cluster>();
  /** Connections whose health probe has not come back yet. */
  readonly #probing = new Set<Redis | Cluster>();
  readonly #healthCheck: NodeJS.Timeout | undefined;

  constructor(options: RedisConnectionOptions) {
    this.#options = options;
    const waiting = options.waitForConnection === true;
    const common: RedisOptions = {
      enableOfflineQueue: waiting,
      maxRetriesPerRequest: waiting ? 1 : 0,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: 1000,
      // Key administration connects once (a few tries) and never again: on a reconnect ioredis sends
      // what was queued and unanswered as the connection turns ready, before its 'ready' event, so
      // before a refused database could be noticed. Those would be written to database 0. A gateway
      // queues nothing, and tries a refused database again no more than every second (each try
      // resets ioredis's count).
      retryStrategy: waiting
        ? (times) => (this.#connectedOnce || times > 3 ? null : 200)
        : (times) => (this.#databaseRefused === undefined ? Math.min(times * 100, RECONNECT_MAX_DELAY_MS) : RECONNECT_MAX_DELAY_MS),
      autoResendUnfulfilledCommands: !waiting,
      lazyConnect: waiting,
      // Sentinel mode: all Sentinels unreachable. Key administration gives up as on a refused connection.
      sentinelRetryStrategy: waiting ? (times) => (times > 3 ? null : 200) : (times) => Math.min(times * 100, RECONNECT_MAX_DELAY_MS),
      // Sentinel mode: told of a failover by the Sentinels (+switch-master), not only by a dropped connection.
      failoverDetector: !waiting,
      disconnectTimeout: 100, // else a socket that never connected holds the process 2 s after close()
    };
    const open = (connectionName: string, extra: RedisOptions = {}) => {
      const redisOptions = { ...options.target.options, ...common, ...extra, connectionName };
      return options.target.url === undefined ? new Redis(redisOptions) : new Redis(options.target.url, redisOptions);
    };
    const clusterNodes = options.target.clusterNodes;
    this.client = clusterNodes === undefined ? open('acquirer-gateway') : openCluster(clusterNodes, { ...options.target.options, ...common, connectionName: 'acquirer-gateway' }, waiting, RECONNECT_MAX_DELAY_MS);
    this.#watchClient();
    const channel = options.channel?.(this.db);
    if (channel !== undefined && clusterNodes === undefined) this.#subscriber = this.#subscribe(open('acquirer-gateway:events', { autoResubscribe: false }), channel);
    if (channel !== undefined && clusterNodes !== undefined) {
      // Only on a node the Cluster named: a configured one may be a stray (not in it, another cluster).
      const subscriberOptions = { ...options.target.options, ...common, autoResubscribe: false, connectionName: 'acquirer-gateway:events' };
      this.client.once('ready', () => this.#openClusterSubscriber(channel, subscriberOptions));
    }
    if (!waiting) {
      for (const connection of [this.client, this.#subscriber]) if (connection instanceof Redis) this.#reopenWhenEnded(connection);
      this.#healthCheck = setInterval(() => this.#checkHealth(), options.healthCheckIntervalMs ?? DEFAULT_REDIS_HEALTH_CHECK_INTERVAL_MS);
      this.#healthCheck.unref();
    }
  }

  /**
   * Gateways: ioredis ends a connection for good (status `end`) when its Sentinel failover detector
   * closes a reconnection under way; the store would stay down. One ended without close() reopens.
   */
  #reopenWhenEnded(connection: Redis): void {
    connection.on('end', () => {
      if (!this.#closing) setTimeout(() => void connection.connect().catch(() => {}), RECONNECT_MAX_DELAY_MS).unref();
    });
  }

  /** The database REDIS_URL names (a Cluster has only 0). */
  get db(): number {
    return this.client instanceof Cluster ? 0 : (this.client.options.db ?? 0);
  }

  /** Whether Redis answers (on the database named), and whether change notices are subscribed (key administration subscribes to none). */
  get health(): { readonly available: boolean; readonly notices: boolean } {
    return this.#health;
  }

  /** Key administration: connect now, and fail with a clear error when Redis is not there. */
  async connect(): Promise<void> {
    if (this.client.status === 'wait') {
      await this.client.connect().catch((err: unknown) => {
        const failure = this.#connectionFailure ?? (err as Error);
        // A Cluster says only that no node gave it the slots; the nodes' own errors say why.
        const cause = this.#nodeFailure ?? (failure as { lastNodeError?: Error }).lastNodeError;
        throw cause === undefined ? failure : new Error(`${failure.message.replace(/\.$/, '')}: ${cause.message}`);
      });
    }
    if (this.#databaseRefused !== undefined) throw new Error(`Redis refused the database REDIS_URL names: ${this.#databaseRefused.message}`);
  }

  /**
   * Announces a change; resolves to how many gateways are subscribed to hear it (PUBLISH's count
   * of receivers; in Cluster mode, the subscribers on every node, since PUBLISH counts one node's).
   */
  async publish(channel: string, message: string): Promise<number> {
    const receivers = await this.client.publish(channel, message);
    return this.client instanceof Cluster ? clusterSubscribers(this.client, channel) : receivers;
  }

  /**
   * Key administration: the connection that writes `key`, the primary serving it (in a Cluster, the
   * node connection itself, so that WAIT afterwards counts that very write).
   */
  async writer(key: string): Promise<Redis> {
    return this.client instanceof Cluster ? primaryServing(this.client, key) : this.client;
  }

  /**
   * Whether `err` is a Cluster's redirection of a command sent to a node that no longer serves its
   * slot (MOVED, ASK): then the slots are asked for again, and the caller retries.
   */
  async redirected(err: unknown): Promise<boolean> {
    if (!(this.client instanceof Cluster) || !/^(MOVED|ASK|CLUSTERDOWN|TRYAGAIN) /.test((err as Error)?.message ?? '')) return false;
    const cluster = this.client;
    await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
    return true;
  }

  async close(): Promise<void> {
    this.#closing = true;
    clearInterval(this.#healthCheck);
    await Promise.all([this.client, this.#subscriber].map((c) => c?.quit().catch(() => c.disconnect())));
  }

  #onError(err: unknown, context: string): void {
    this.#options.onError?.(err, context);
  }

  #watchClient(): void {
    const client = this.client;
    client.on('connect', () => (this.#databaseRefused = undefined));
    client.on('ready', () => {
      this.#connectedOnce = true;
      this.#nodeFailure = undefined;
    });
    client.on('error', (err: unknown) => {
      this.#connectionFailure = err as Error;
      if ((err as { command?: { name?: string } }).command?.name === 'select') this.#databaseRefused = err as Error;
      this.#onError(err, 'redis connection');
    });
    client.on('ready', () => {
      this.#unanswered.delete(client);
      // Not one command on database 0: the connection is dropped (and tried again) before any is sent.
      if (this.#databaseRefused !== undefined) {
        this.#onError(new Error(`Redis refused the database REDIS_URL names (${this.#databaseRefused.message}): the key store stays unavailable`), 'redis connection');
        client.disconnect(true);
      }
      this.#updateHealth();
    });
    client.on('close', () => this.#updateHealth());
    // Cluster mode: one node's failure (the Cluster as a whole reports 'error' and 'close' above).
    client.on('node error', (err: unknown, node: string) => {
      this.#nodeFailure = err as Error;
      this.#onError(err, `redis cluster node ${node}`);
    });
  }

  /**
   * Cluster mode: a subscriber on one node, and when it is lost (or its health check unanswered),
   * a new one on the next node the Cluster client knows. Its own connection never reconnects (a
   * dead node's address would be tried for ever); resubscribing resyncs as in the other modes.
   */
  #openClusterSubscriber(channel: string, redisOptions: RedisOptions): void {
    if (this.#closing) return;
    const candidates = subscriberCandidates(this.client as Cluster);
    const next = () => {
      const delay = Math.min(++this.#clusterAttempt.failures * 100, RECONNECT_MAX_DELAY_MS);
      setTimeout(() => this.#openClusterSubscriber(channel, redisOptions), delay).unref();
    };
    if (candidates.length === 0) return next(); // the Cluster knows no node now: ask it again
    const node = candidates[this.#clusterAttempt.next++ % candidates.length]!;
    const subscriber = new Redis({ ...redisOptions, host: node.host, port: node.port, retryStrategy: () => null, lazyConnect: false });
    subscriber.once('end', () => {
      this.#unanswered.delete(subscriber);
      next();
    });
    this.#subscriber = this.#subscribe(subscriber, channel);
  }

  /**
   * Subscribed on every (re)connect by us, not by ioredis: with no offline queue a subscription asked
   * for before the connection is up would be lost, and the store must know when it is live.
   */
  #subscribe(subscriber: Redis, channel: string): Redis {
    subscriber.on('error', (err: unknown) => this.#onError(err, 'redis change-notice connection'));
    subscriber.on('close', () => {
      this.#subscribed = false;
      this.#updateHealth();
    });
    subscriber.on('ready', () => {
      this.#unanswered.delete(subscriber);
      subscriber.subscribe(channel).then(
        () => {
          // Notices published before this moment were never received (at start-up too, if the first
          // subscribe failed while records were being cached): drop everything cached.
          this.#options.onEvent({ type: 'resync' });
          this.#clusterAttempt.failures = 0; // a node that takes connections but refuses SUBSCRIBE is no success
          this.#subscribed = true;
          this.#updateHealth();
        },
        (err: unknown) => {
          this.#onError(err, 'subscribing to key change notices');
          subscriber.disconnect(true); // reconnect and try again
        },
      );
    });
    subscriber.on('message', (from: string, message: string) => {
      if (from === channel) this.#options.onEvent({ type: 'message', message });
    });
    return subscriber;
  }

  /**
   * A black-holed Redis keeps its sockets open and silent: nothing closes, so nothing would say the
   * store is down while cached keys go on being trusted. A probe that times out reconnects that
   * connection, which reports it down until it answers again (and resubscribes, then resyncs). The
   * commands connection's probe reads the change counter (in a Cluster, from the node serving the
   * store, where a PING would go to any node); the subscriber's is a PING. One probe at a time each.
   */
  #checkHealth(): void {
    for (const connection of [this.client, this.#subscriber]) {
      if (connection === undefined || connection.status !== 'ready' || this.#probing.has(connection)) continue;
      const versionKey = connection === this.client ? this.#options.versionKey : undefined;
      const probe = versionKey !== undefined ? connection.get(versionKey).then((v) => this.#options.onVersion?.(Number(v ?? 0))) : connection.ping();
      this.#probing.add(connection);
      probe.then(
        () => {
          this.#probing.delete(connection);
          // A Cluster is not reconnected as a whole for one node's silence: it is down until a probe answers.
          if (connection instanceof Cluster && this.#unanswered.delete(connection)) this.#updateHealth();
        },
        (err: unknown) => {
          this.#probing.delete(connection);
          this.#onError(err, connection === this.client ? 'redis health check' : 'redis change-notice health check');
          this.#unanswered.add(connection);
          this.#updateHealth();
          if (!(connection instanceof Cluster)) connection.disconnect(true);
        },
      );
    }
  }

  #updateHealth(): void {
    const available = this.client.status === 'ready' && this.#databaseRefused === undefined && !this.#unanswered.has(this.client);
    const notices = this.#subscriber !== undefined && this.#subscribed && !this.#unanswered.has(this.#subscriber);
    if (available === this.#health.available && notices === this.#health.notices) return;
    this.#health = { available, notices };
    this.#options.onEvent({ type: 'health', available, notices });
  }
}
