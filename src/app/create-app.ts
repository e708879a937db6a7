import express, { type Express } from 'express';
import { createErrorHandler } from './error-handler.js';
import type { KeyResolver } from '../keys/key-resolver.js';
import type { Logger } from '../observability/logger/logger.js';
import type { IpAllowlist } from '../net/ip-allowlist.js';
import type { GatewayMetrics } from '../observability/metrics/metrics.js';
import { createRequestObserver } from './request-observer.js';
import { createPipeline, inOrder } from './pipeline.js';
import { createShadowObserver } from './shadow-observer.js';
import type { CompiledPolicy } from '../policy/compile.js';
import type { UpstreamProxy } from '../proxy/create-proxy.js';
import type { RateLimiter } from '../limits/rate-limiter.js';
import './request-context.js';

export interface AppDeps {
  /** The current policy; read once per request, so a later reload never changes a request mid-way. */
  readonly policy: () => CompiledPolicy;
  readonly resolver: KeyResolver;
  readonly trustedProxies: IpAllowlist | null;
  /** The way upstream (createUpstreamProxy); its pool is the caller's to close. */
  readonly proxy: UpstreamProxy;
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  /** ACQUIRER_MAX_IN_FLIGHT (the dispatch step's default when absent). */
  readonly acquirerMaxInFlight?: number | undefined;
  /** Where the keys' budgets are kept (RATE_LIMIT_STORE); absent: no rate is judged. */
  readonly rateLimiter?: RateLimiter | undefined;
  /** RATE_LIMIT_FAIL=closed. */
  readonly rateLimitFailClosed?: boolean | undefined;
  /** The shadow policy now (POLICY_SHADOW_FILE); absent: no shadow, and no work for one. */
  readonly shadowPolicy?: (() => CompiledPolicy) | undefined;
}

/** Builds the public app. No I/O here: listening, Redis and the policy file belong to the caller. */
export function createApp(deps: AppDeps): Express {
  const app = express();
  // A proxy uses none of these, and each would either cost time or answer for the upstream.
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('query parser', false);

  const steps = createPipeline({ ...deps, proxy: deps.proxy.forward });
  const { shadowPolicy } = deps;
  const shadow = shadowPolicy === undefined ? undefined : createShadowObserver({ shadow: shadowPolicy, metrics: deps.metrics, logger: deps.logger });
  app.use(inOrder([createRequestObserver({ ...deps, shadow }), ...steps]));
  app.use(createErrorHandler(deps.logger));
  return app;
}
