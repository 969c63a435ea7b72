# Haru: one image for `haru api`, `haru worker`, `haru supervisor` and the simulator.
FROM node:20-bookworm-slim

ENV NODE_ENV=production \
    # Inside containers Temporal is a server of its own (TEMPORAL_ADDRESS); the dev CLI is not needed.
    HARU_SKIP_TEMPORAL_INSTALL=1

# openssl makes the compose stack's supervisor certificates at first start (deploy/compose/make-certs.sh).
RUN apt-get update && apt-get install -y --no-install-recommends openssl && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts ./scripts
RUN npm ci --omit=dev && npm cache clean --force

COPY . .
# The compiled CLI (docs/architecture.md §8.6): the npm ci above ran before the sources were here.
RUN node scripts/build-cli.js
# /app/.haru/tls exists in the image so that a volume mounted there starts out owned by haru.
RUN useradd --system --uid 10001 --home /app haru && mkdir -p /app/.haru/tls && chown -R haru /app/.haru
USER haru

ENTRYPOINT ["node", "bin/haru.js"]
CMD ["--help"]
