# syntax=docker/dockerfile:1
#
# One image for every shardcar command: the manager (webhook), the injected
# sidecar (`shardcar proxy --injected`), devapi and the CLI.
#
#   npm run image                                  # podman, no registry but npm's and Debian's (docs/install.md)
#   docker build -t registry.example.com/shardcar:0.1.0 .    # anywhere node:24-bookworm-slim can be pulled
#   docker run --rm --read-only registry.example.com/shardcar:0.1.0 --help
#
# Runtime contract: runs as UID/GID 65532 (numeric, so Kubernetes can verify
# runAsNonRoot), writes nothing outside mounted volumes (so
# readOnlyRootFilesystem: true works), and listens only on ports given by
# flags. The runtime stage is FROM scratch: node, the libraries it loads, the
# production node_modules and dist/; no shell, npm, package manager or
# compiler (test/image/image.test.ts checks all of this on the built image).
#
# NODE_IMAGE: any Debian-based image with Node 24 and npm on PATH. It is only
# built *in*; the runtime takes node and its libraries from it.
# `image/local-base.sh` makes one from debootstrap and the npm registry.
ARG NODE_IMAGE=node:24-bookworm-slim

# npm in the build stages: a cache mount keeps npm's cache out of every layer
# (and warm between builds); the optional secret `npm-ca` is a CA bundle for
# registries behind a TLS-intercepting proxy (`--secret id=npm-ca,src=FILE`),
# never stored in a layer.

# --- build: compile TypeScript to dist/ ------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# Manifests first, so the dependency layer is reused until they change.
COPY package.json package-lock.json ./
# Dev dependencies are needed to compile (typescript, @types/node).
# --ignore-scripts: the only install script is the `node` devDependency's,
# which would fetch a second Node build; the compiler runs on NODE_IMAGE's.
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
    npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# tsc directly, not `npm run build`: npm would look for node in
# node_modules/.bin first, where the `node` devDependency, left uninstalled
# by --ignore-scripts, has no binary.
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json

# --- deps: production dependencies only -------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# No production dependency has an install script; --ignore-scripts makes sure
# none can run (or fetch anything) at image build time. Type declarations and
# source maps are never loaded at run time, so they go: with them
# node_modules is 85 MB, 30 MB of it @kubernetes/client-node's generated .d.ts.
RUN --mount=type=cache,target=/root/.npm \
    --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \) -delete

# --- rootfs: node and exactly the libraries it loads --------------------------
FROM ${NODE_IMAGE} AS rootfs
COPY image/runtime-rootfs.sh /usr/local/bin/runtime-rootfs.sh
RUN sh /usr/local/bin/runtime-rootfs.sh /rootfs

# --- runtime ----------------------------------------------------------------
FROM scratch
LABEL org.opencontainers.image.title="shardcar" \
      org.opencontainers.image.description="Shard-scoped caches for unmodified Kubernetes controllers" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=rootfs /rootfs/ /
ENV PATH=/usr/local/bin \
    NODE_ENV=production
# Node/V8 and allocator settings for every shardcar command: this is their
# one place in the image. Their values and reasons come from
# src/sidecar-runtime.ts (test/sidecar-runtime.test.ts checks these agree);
# the webhook writes the same into every injected container
# (src/webhook/patch.ts, sidecar).
ENV NODE_OPTIONS="--max-semi-space-size=1" \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# Owned by root and not writable by the runtime user: the code is immutable
# even where the root filesystem is not mounted read-only.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# package.json carries "type": "module", which makes dist/*.js ES modules.
COPY package.json ./
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/node", "--enable-source-maps", "/app/dist/cli/bin.js"]
CMD ["--help"]
