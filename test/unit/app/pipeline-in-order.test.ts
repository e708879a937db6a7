import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import supertest from 'supertest';
import { inOrder } from '../../../src/app/pipeline.js';

/** An app running `steps` through inOrder, then a final handler; errors are rendered with their message. */
function appWith(steps: RequestHandler[]) {
  const seen: string[] = [];
  const errors: unknown[] = [];
  const app = express();
  app.use(inOrder(steps.map((step, i): RequestHandler => (req, res, next) => (seen.push(`step${i}`), step(req, res, next)))));
  app.use((_req, res) => {
    seen.push('after');
    res.send('reached the end');
  });
  const onError: ErrorRequestHandler = (err, _req, res, _next) => {
    errors.push(err);
    res.status(500).send(`error: ${err instanceof Error ? err.message : String(err)}`);
  };
  app.use(onError);
  return { app, seen, errors };
}

const pass: RequestHandler = (_req, _res, next) => next();

describe('inOrder: steps as one middleware', () => {
  it('runs every step in order, then what follows it in the app', async () => {
    const { app, seen } = appWith([pass, pass, pass]);
    const res = await supertest(app).get('/');
    expect([res.status, res.text]).toEqual([200, 'reached the end']);
    expect(seen).toEqual(['step0', 'step1', 'step2', 'after']);
  });

  it('waits for a step that calls next later', async () => {
    const later: RequestHandler = (_req, _res, next) => void setImmediate(next);
    const { app, seen } = appWith([pass, later, pass]);
    expect((await supertest(app).get('/')).text).toBe('reached the end');
    expect(seen).toEqual(['step0', 'step1', 'step2', 'after']);
  });

  it.each<[string, RequestHandler, string]>([
    ['throws', () => {
      throw new Error('thrown');
    }, 'thrown'],
    ['passes an error to next', (_req, _res, next) => next(new Error('passed')), 'passed'],
    ['returns a rejected promise', async () => {
      await Promise.resolve();
      throw new Error('rejected');
    }, 'rejected'],
    // As Express does for a handler of its own: a rejection without a reason is still an error.
    ['returns a promise rejected without a reason', () => Promise.reject(undefined), 'Rejected promise'],
    // Express accepts any thenable a handler returns, not only native promises.
    ['returns a rejected thenable', () => ({ then: (_ok: unknown, fail: (e: Error) => void) => fail(new Error('thenable')) }), 'thenable'],
    // Express would go on to the next step here; a step that failed must never let the request through.
    ['throws nothing', () => {
      throw undefined;
    }, 'Thrown without a reason'],
  ])('when a step %s, the error goes to the app’s error handling once and later steps do not run', async (_how, failing, message) => {
    const { app, seen, errors } = appWith([pass, failing, pass]);
    const res = await supertest(app).get('/');
    expect([res.status, res.text]).toEqual([500, `error: ${message}`]);
    expect(seen).toEqual(['step0', 'step1']);
    expect(errors).toHaveLength(1);
  });

  it("moves on to the next step on next('route'), as from a use layer", async () => {
    const skipRoute: RequestHandler = (_req, _res, next) => next('route');
    const { app, seen } = appWith([pass, skipRoute, pass]);
    expect((await supertest(app).get('/')).text).toBe('reached the end');
    expect(seen).toEqual(['step0', 'step1', 'step2', 'after']);
  });

  it('reports a step that throws after the one before it called next by itself, not twice', async () => {
    const throws: RequestHandler = () => {
      throw new Error('second step');
    };
    // step0's next() runs step1 synchronously inside step0: the throw must not also reach step0.
    const { app, errors } = appWith([pass, throws]);
    expect((await supertest(app).get('/')).text).toBe('error: second step');
    expect(errors).toHaveLength(1);
  });
});
