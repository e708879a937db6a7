import { MemoryKeyStore } from '../../../src/keys/memory-key-store.js';
import { KeyResolver } from '../../../src/keys/key-resolver.js';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import request from 'supertest';
import { createPipeline, inOrder } from '../../../src/app/pipeline.js';

describe('the pipeline', () => {
  it('runs the steps in the order the API defines', () => {
    const steps = createPipeline({ resolver: new KeyResolver(new MemoryKeyStore()), trustedProxies: null, proxy: () => {} });
    expect(steps.map((step) => step.name)).toEqual(['requestGuard', 'apiKeyAuth', 'ipWhitelist', 'routeMatch', 'permissions', 'requestShape', 'rateLimit', 'acquirerShare', 'requestBody', 'dispatch']);
  });
});

/**
 * An app running `steps` in order, then a step that records it ran and answers 200; errors answer 500
 * with their text, and the error handler records that it ran.
 */
function appOf(ran: string[], ...steps: RequestHandler[]) {
  const app = express();
  app.use(
    inOrder([
      ...steps,
      function last(_req, res) {
        ran.push('last');
        if (!res.headersSent) res.end();
      },
    ]),
  );
  app.use(((err, _req, res, _next) => {
    ran.push('error handler');
    res.status(500).send(String(err));
  }) as ErrorRequestHandler);
  return app;
}

describe('steps in order', () => {
  it('run one after the other, each when the one before calls next(), also later', async () => {
    const ran: string[] = [];
    const first: RequestHandler = (_req, _res, next) => {
      ran.push('first');
      next();
    };
    const later: RequestHandler = (_req, _res, next) => void setImmediate(() => (ran.push('later'), next()));
    const res = await request(appOf(ran, first, later)).get('/');
    expect(res.status).toBe(200);
    expect(ran).toEqual(['first', 'later', 'last']);
  });

  it('stop at a step that answers without calling next', async () => {
    const ran: string[] = [];
    const answers: RequestHandler = (_req, res) => void res.status(404).end();
    expect((await request(appOf(ran, answers)).get('/')).status).toBe(404);
    expect(ran).toEqual([]);
  });

  it.each([[undefined], [null], [0], ['route'], ['router'], [new Error('refused')]])('a step that throws %j stops the request with an error: the next step never runs', async (thrown) => {
    const ran: string[] = [];
    const throwsVerdict: RequestHandler = function throwsVerdict() {
      throw thrown; // eslint-disable-line @typescript-eslint/only-throw-error -- the case under test
    };
    const res = await request(appOf(ran, throwsVerdict)).get('/');
    expect([res.status, res.text]).toEqual([500, thrown instanceof Error ? String(thrown) : `Error: throwsVerdict threw ${String(thrown)}`]);
    expect(ran).toEqual(['error handler']);
  });

  it.each([[null], [0], [''], ['route'], ['router']])('a step that passes %j to next stops the request with an error', async (verdict) => {
    const ran: string[] = [];
    const passes: RequestHandler = function passes(_req, _res, next) {
      next(verdict);
    };
    const res = await request(appOf(ran, passes)).get('/');
    expect([res.status, res.text]).toEqual([500, `Error: passes passed ${String(verdict)} to next`]);
    expect(ran).toEqual(['error handler']);
  });

  it('a step whose promise rejects stops the request with an error', async () => {
    const ran: string[] = [];
    const rejects = async function rejects(): Promise<void> {
      throw undefined; // eslint-disable-line @typescript-eslint/only-throw-error -- the case under test
    } as unknown as RequestHandler;
    const res = await request(appOf(ran, rejects)).get('/');
    expect([res.status, res.text]).toEqual([500, 'Error: rejects rejected with undefined']);
    expect(ran).toEqual(['error handler']);
  });

  const turn = () => new Promise((resolve) => setImmediate(resolve));

  it.each<[string, (ran: string[]) => RequestHandler[]]>([
    ['a step that calls next() after its error', () => [(_req, _res, next) => (next(new Error('refused')), void setImmediate(() => next()))]],
    ['a step that throws after next(), while the next one waits', (ran) => [
      (_req, _res, next) => {
        next();
        throw new Error('refused');
      },
      function waits(_req, _res, next) {
        ran.push('waits');
        setImmediate(() => next());
      },
    ]],
    ['a step whose promise rejects after next(), while the next one waits', (ran) => [
      async (_req, _res, next) => {
        next();
        throw new Error('refused');
      },
      function waits(_req, _res, next) {
        ran.push('waits');
        setImmediate(() => next());
      },
    ]],
  ])('%s: no step runs after the error', async (_, steps) => {
    const ran: string[] = [];
    const res = await request(appOf(ran, ...steps(ran))).get('/');
    await turn();
    await turn();
    expect([res.status, res.text]).toEqual([500, 'Error: refused']);
    expect(ran.filter((r) => r !== 'waits')).toEqual(['error handler']);
  });

  it('a second next() from one step does not skip the step after it', async () => {
    const ran: string[] = [];
    const twice: RequestHandler = (_req, _res, next) => {
      next();
      next();
    };
    const waits: RequestHandler = function waits(_req, _res, next) {
      ran.push('waits');
      setImmediate(() => (ran.push('waited'), next()));
    };
    expect((await request(appOf(ran, twice, waits)).get('/')).status).toBe(200);
    await turn();
    expect(ran).toEqual(['waits', 'waited', 'last']);
  });

  it('a value with no toString of its own, or one that throws, is still an error that names it', async () => {
    const ran: string[] = [];
    const noProto = async function noProto(): Promise<void> {
      throw Object.create(null); // eslint-disable-line @typescript-eslint/only-throw-error -- the case under test
    } as unknown as RequestHandler;
    const res = await request(appOf(ran, noProto)).get('/');
    expect([res.status, res.text]).toEqual([500, 'Error: noProto rejected with [object Object]']);
    const throwing: RequestHandler = function throwing(_req, _res, next) {
      next({ toString: () => { throw new Error('no text'); } });
    };
    const again = await request(appOf(ran, throwing)).get('/');
    expect([again.status, again.text]).toEqual([500, 'Error: throwing passed [object Object] to next']);
    expect(ran).toEqual(['error handler', 'error handler']);
  });

  it("Express's own layers run into the next step on a falsy throw: what failing closed is for", async () => {
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
