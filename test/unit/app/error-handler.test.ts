import express from 'express';
import request from 'supertest';
import { createErrorHandler, FAILURE_LINE_EVERY_MS } from '../../../src/app/error-handler.js';
import { GatewayError } from '../../../src/errors/gateway-error.js';
import { createLogger, silentLogger } from '../../../src/observability/logger/logger.js';

function appThrowing(error: unknown) {
  const app = express();
  app.disable('x-powered-by');
  app.use((_req, res, next) => {
    res.locals.requestId = 'req-1'; // as the request observer sets it
    res.setHeader('x-leak', 'set before the error');
    next(error);
  });
  app.use(createErrorHandler(silentLogger));
  return app;
}

describe('the error handler', () => {
  it('renders a GatewayError with its documented body and no header set before it', async () => {
    const res = await request(appThrowing(new GatewayError('PERMISSION_DENIED'))).get('/');
    expect(res.status).toBe(403);
    expect(res.text).toBe('{"message":"Unauthorized"}');
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['x-leak']).toBeUndefined();
    expect(res.headers['x-request-id']).toBe('req-1');
  });

  it('turns anything else into the generic 500, never its message', async () => {
    const res = await request(appThrowing(new Error('password=hunter2 at db.internal'))).get('/');
    expect(res.status).toBe(500);
    expect(res.text).toBe('{"message":"Internal server error"}');
    expect(res.text).not.toContain('hunter2');
    expect(res.headers['x-request-id']).toBe('req-1');
  });

  it("writes a failure's line at most once a second, saying how many it did not write; a different failure is written", async () => {
    let clock = 0;
    let cause = 'redis down';
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', { write: (line: string) => lines.push(JSON.parse(line)) });
    const app = express();
    app.use((_req, res, next) => {
      res.locals.requestId = 'req-1';
      next(new GatewayError('KEY_STORE_UNAVAILABLE', { cause: new Error(cause) }));
    });
    app.use(createErrorHandler(logger, () => clock));
    const statuses = [];
    for (const [at, because] of [[0, 'redis down'], [10, 'redis down'], [20, 'record key:0a1b… unreadable'], [999, 'redis down'], [FAILURE_LINE_EVERY_MS, 'redis down'], [FAILURE_LINE_EVERY_MS + 1, 'redis down']] as const) {
      [clock, cause] = [at, because];
      statuses.push((await request(app).get('/')).status);
    }
    expect(statuses).toEqual([503, 503, 503, 503, 503, 503]);
    expect(lines.map((l) => [l.event, l.code, (l.err as { message: string }).message, l.same_failures_unwritten, l.unwritten_after_ms_ago])).toEqual([
      ['request_failed', 'KEY_STORE_UNAVAILABLE', 'redis down', undefined, undefined],
      ['request_failed', 'KEY_STORE_UNAVAILABLE', 'record key:0a1b… unreadable', undefined, undefined],
      ['request_failed', 'KEY_STORE_UNAVAILABLE', 'redis down', 2, FAILURE_LINE_EVERY_MS],
    ]);
  });
});
