# syntax=docker/dockerfile:1
# Build: compile TypeScript with the dev dependencies. Node 24 is the active LTS (Node 20 left support on
# 2026-04-30); engines promise >=24 and npm test runs every stage on Node 24 (scripts/test.sh).
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime: production dependencies and dist/ only, as the unprivileged `node` user.
FROM node:24-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM reaches node directly (exec form): in-flight judgments finish within SHUTDOWN_GRACE_MS.
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=32", "dist/server/main.js"]
