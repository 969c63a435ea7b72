# Haru's control plane in one image: `haru api`, `haru worker` and the `haru` command (also `haru supervisor`
# and the simulator, which docker-compose.yml runs), chosen by the command: `docker run haru:0.1.0 api`.
#
#   docker build -t haru:$(node -p 'require("./package.json").version') -t haru:$(git rev-parse --short=12 HEAD) \
#     --build-arg HARU_REVISION=$(git rev-parse HEAD) .
#
# Tags: haru:<package.json version> for a release, haru:<first 12 hex digits of the commit> for any commit
# (deploy/kubernetes/README.md). The base image is pinned by tag; pin its digest as well with
# --build-arg NODE_IMAGE=node:20.20.2-bookworm-slim@sha256:<digest of that tag in your registry>.
ARG NODE_IMAGE=node:20.20.2-bookworm-slim

# Production dependencies, installed by npm in a stage of their own: npm's cache stays behind.
FROM ${NODE_IMAGE} AS deps
# Inside containers Temporal is a server of its own (TEMPORAL_ADDRESS); the dev CLI is not needed.
ENV HARU_SKIP_TEMPORAL_INSTALL=1
WORKDIR /app
COPY package.json package-lock.json ./
# The postinstall script runs during `npm ci` (no sources are here yet, so it compiles nothing).
COPY scripts ./scripts
RUN npm ci --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ARG HARU_REVISION=unknown
LABEL org.opencontainers.image.title="haru" \
      org.opencontainers.image.description="Haru control plane: haru api, haru worker, the haru command" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${HARU_REVISION}"
ENV NODE_ENV=production \
    HARU_SKIP_TEMPORAL_INSTALL=1

# openssl makes the compose stack's supervisor certificates at first start (deploy/compose/make-certs.sh).
# Not pinned to a version: Debian's archive keeps only the current one, which security updates replace.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends openssl && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY . .
# The compiled CLI (docs/architecture.md §8.6), built here where the sources are. The files stay root's: the
# process cannot change its own code. /app/.haru/tls exists so that a volume mounted there starts out owned
# by haru (uid and gid 10001, numeric so that Kubernetes' runAsNonRoot can check it).
RUN node scripts/build-cli.js \
    && groupadd --system --gid 10001 haru \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home haru \
    && mkdir -p /app/.haru/tls \
    && chown -R 10001:10001 /app/.haru
USER 10001:10001

ENTRYPOINT ["node", "bin/haru.js"]
CMD ["--help"]
