# acquirer-gateway: a build stage and a slim runtime stage on the official Node 24 LTS image.
# The build runs the same commands as the README (npm ci && npm run build); the runtime keeps
# production dependencies only and runs as the image's non-root `node` user.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci --no-audit --no-fund
COPY src ./src
RUN npm run build

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    PORT=8080 \
    ADMIN_PORT=9090 \
    ADMIN_HOST=0.0.0.0 \
    POLICY_FILE=/app/policies/acquirer-api.yaml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The Node.js version check the command runs first (dist/cli.js imports it).
COPY scripts/require-node.mjs ./scripts/
# The shipped policy; mount your own over /app/policies (the gateway reloads it when it changes).
COPY policies ./policies
USER node
EXPOSE 8080 9090
# Where the admin listener is (ADMIN_HOST and ADMIN_PORT as set in the environment): a wildcard
# address through loopback, a specific one as it is.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["node", "-e", "const h=process.env.ADMIN_HOST||'127.0.0.1';const a=h==='0.0.0.0'?'127.0.0.1':h==='::'?'[::1]':h.includes(':')?'['+h+']':h;fetch('http://'+a+':'+(process.env.ADMIN_PORT||9090)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
# Run through its shebang, which carries the node flags the gateway is measured with.
ENTRYPOINT ["/app/dist/cli.js"]
CMD ["serve"]
