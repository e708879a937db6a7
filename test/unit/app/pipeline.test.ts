import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { KeyResolver } from '../../../src/keys/key-resolver.js';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import request from 'supertest';
import { createPipeline, failClosed } from '../../../src/app/pipeline.js';

describe('the pipeline', () => {
  it('runs the steps in the order the API defines', () => {
    const steps = createPipeline({ resolver: new KeyResolver(new MemoryKeyStore()), trustedProxies: null, proxy: () => {} });
    expect(steps.map((step) => step.name)).toEqual(['requestGuard', 'apiKeyAuth', 'ipWhitelist', 'routeMatch', 'permissions', 'requestShape', 'rateLimit', 'acquirerShare', 'requestBody', 'dispatch']);
  });
});

describe('a step that throws what is not an Error', () => {
  it.each([[undefined], [null], [0], ['route'], ['router']])('(%j) stops the request with an error: the next step never runs', async (thrown) => {
    const ran: string[] = [];
    const app = express();
    const throwsVerdict: RequestHandler = function throwsVerdict() {
      ran.push('throwsVerdict');
      throw thrown; // eslint-disable-line @typescript-eslint/only-throw-error -- the case under test
    };
    app.use(failClosed(throwsVerdict), () => ran.push('next step'));
    app.use(((err, _req, res, _next) => res.status(500).send(String(err))) as ErrorRequestHandler);
    const res = await request(app).get('/');
    expect(res.status).toBe(500);
    expect(res.text).toBe(`Error: throwsVerdict threw ${String(thrown)}`);
    expect(ran).toEqual(['throwsVerdict']);
  });

  it('runs into the next step without the guard: what the guard is for', async () => {
    const ran: string[] = [];
    const app = express();
    app.use(
      () => {
        throw undefined; // eslint-disable-line @typescript-eslint/only-throw-error -- the case under test
      },
      (_req: unknown, res: { end: () => void }) => {
        ran.push('next step');
        res.end();
      },
    );
    expect((await request(app).get('/')).status).toBe(200);
    expect(ran).toEqual(['next step']);
  });
});
