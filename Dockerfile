# syntax=docker/dockerfile:1
#
# One image for every shardcar command: the manager (webhook), the injected
# sidecar (`shardcar proxy --injected`), devapi and the CLI.
#
#   docker build -t ghcr.io/shardcar/shardcar:0.1.0 .
#   docker run --rm --read-only ghcr.io/shardcar/shardcar:0.1.0 --help
#
# Runtime contract: runs as UID/GID 65532 (numeric, so Kubernetes can verify
# runAsNonRoot), writes nothing outside mounted volumes (so
# readOnlyRootFilesystem: true works), and listens only on ports given by
# flags.

ARG NODE_IMAGE=node:24-bookworm-slim

# --- build: compile TypeScript to dist/ ------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# Manifests first, so the dependency layer is reused until they change.
COPY package.json package-lock.json ./
# Dev dependencies are needed to compile (typescript, @types/node). The dev
# dependency "node" pins the toolchain for `npm run` scripts; its install
# script fetches that Node build from the npm registry.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- deps: production dependencies only -------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# No production dependency has an install script; --ignore-scripts makes sure
# none can run (or fetch anything) at image build time.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force

# --- runtime ----------------------------------------------------------------
FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.title="shardcar" \
      org.opencontainers.image.description="Shard-scoped caches for unmodified Kubernetes controllers" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
# Owned by root and not writable by the runtime user: the code is immutable
# even where the root filesystem is not mounted read-only.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# package.json carries "type": "module", which makes dist/*.js ES modules.
COPY package.json ./
USER 65532:65532
ENTRYPOINT ["node", "--enable-source-maps", "/app/dist/cli/bin.js"]
CMD ["--help"]
