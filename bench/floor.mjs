// The floor of the stack, in its own process: Express 5 + http-proxy-middleware, no checks.
import http from 'node:http';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

const app = express();
app.disable('x-powered-by');
app.use(createProxyMiddleware({ target: process.argv[2], agent: new http.Agent({ keepAlive: true, maxSockets: 256 }) }));
const server = http.createServer(app);
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
// A clean exit on SIGTERM, so that `node --cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));
