import express from 'express';
import request from 'supertest';
import { createErrorHandler } from '../../../src/errors/error-handler.js';
import { GatewayError } from '../../../src/errors/gateway-error.js';
import { silentLogger } from '../../../src/logger.js';

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
});
