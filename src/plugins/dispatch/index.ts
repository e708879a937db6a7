import type { RequestHandler } from 'express';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export interface DispatchDeps {
  /** Forwards an allowed request upstream. */
  readonly proxy: RequestHandler;
}

/** Step 8: answer from the policy when the route says so, otherwise proxy. */
export function createDispatch({ proxy }: DispatchDeps): RequestHandler {
  return function dispatch(req, res, next) {
    if (res.locals.route!.serve === 'permission_catalogue') {
      const body = res.locals.policy.catalogueBody;
      res.writeHead(200, { 'content-type': JSON_CONTENT_TYPE, 'content-length': String(body.length), 'x-request-id': res.locals.requestId, ...res.locals.rateLimitHeaders });
      res.end(body);
      return;
    }
    return proxy(req, res, next);
  };
}
