# Placeholder until the operations issue: a build stage and a slim runtime stage on Node 24,
# running the compiled CLI as a non-root user. Not built on the development machines (no Docker engine).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
RUN npm ci
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY policies ./policies
USER node
EXPOSE 8080
CMD ["node", "dist/cli.js", "serve"]
