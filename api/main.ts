/**
 * The `haru api` composition root: reads the environment, opens the database, the Temporal client and the
 * HTTP server, and installs the signal handlers. Everything else in api/ is a factory taking its deps.
 */
import { listenerLimits } from '../lib/listener-limits';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createDatabase } from '../db/client';
import { listenPoolerWarning } from '../db/postgres-tls';
import { migrate } from '../db/migrate';
import { composeApi } from './compose';
import { type ApiConfig, apiCertificateFiles, loadApiConfig } from './config';
import { batchedLineWriter, createJsonLogger, type Logger } from '../lib/logger';
import { readServerCertificate, reloadCertificateOnChange } from '../lib/server-tls';
import { ConfigError } from '../schemas/env';
import { createApiMetrics } from './metrics';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/**
 * Where to bind. Without a key (neither HARU_API_TOKEN nor HARU_API_KEYS_FILE) the API never leaves
 * loopback: a HOST asking for more is overridden with a loud warning.
 */
export function bindHost(config: ApiConfig, logger: Logger, stderr: (text: string) => void): string {
  if (config.HARU_API_TOKEN || config.apiKeys?.length) return config.HOST ?? '0.0.0.0';
  logger.warn(
    'neither HARU_API_TOKEN nor HARU_API_KEYS_FILE is set: the API accepts unauthenticated requests and binds to 127.0.0.1 only',
    { requestedHost: config.HOST ?? null },
  );
  stderr(
    '\n*** WARNING: HARU_API_TOKEN is not set. /v1/* is open to anyone who can reach 127.0.0.1. ***\n' +
      '*** Set HARU_API_TOKEN (or HARU_API_KEYS_FILE) before exposing the API beyond this machine. ***\n\n',
  );
  return config.HOST && LOOPBACK.has(config.HOST) ? config.HOST : '127.0.0.1';
}

/** A running API process; `close` drains the server and releases every connection. */
export interface RunningApi {
  url: string;
  close(): Promise<void>;
}

/** Starts the API from `env` and resolves once it listens. Throws ConfigError on bad configuration. */
export async function startApi(env: NodeJS.ProcessEnv = process.env): Promise<RunningApi> {
  const config = loadApiConfig(env);
  const logger = createJsonLogger({
    level: config.LOG_LEVEL,
    // One access-log line per request: lines are joined into one stdout write per 10 ms.
    write: batchedLineWriter((chunk) => process.stdout.write(chunk)).write,
    base: { service: 'haru-api' },
  });
  const host = bindHost(config, logger, (text) => process.stderr.write(text));
  // HTTPS when a certificate is configured: read before anything opens (a bad file stops the start), renewed
  // files served as they change.
  const certificate = apiCertificateFiles(config);
  const served = certificate && readServerCertificate(certificate, (m) => new ConfigError(m));
  const database = await createDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: path.resolve(config.HARU_STATE_DIR, 'pgdata'),
    listenUrl: config.HARU_LISTEN_DATABASE_URL,
    tlsEnv: config,
  });
  const pooler = config.DATABASE_URL && listenPoolerWarning(config.DATABASE_URL, config.HARU_LISTEN_DATABASE_URL);
  if (pooler) logger.warn(pooler);
  await migrate(database);
  const composed = await composeApi({ database, config, logger, metrics: createApiMetrics({ withDefaults: true }) });
  const { api } = composed;
  const server = served
    ? https.createServer({ ...listenerLimits(), ...served }, api.handle)
    : http.createServer(listenerLimits(), api.handle);
  const stopReloading = certificate
    ? reloadCertificateOnChange(server as https.Server, certificate, {
        reloaded: () => logger.info('api certificate reloaded', { certFile: certificate.cert.file }),
        failed: (error) => logger.warn('api certificate not reloaded: the one in force stays', { error }),
      })
    : () => undefined;
  // Streams may be quiet for long; only the request itself is bounded by Node's requestTimeout.
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.PORT, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `${certificate ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  logger.info('api listening', { url, temporal: config.temporal.address, database: database.kind });

  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= (async () => {
        stopReloading();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          // Followers end now; requests in flight get HARU_SHUTDOWN_GRACE_MS to finish, then are cut.
          api.endStreams();
          setTimeout(() => server.closeAllConnections(), config.HARU_SHUTDOWN_GRACE_MS).unref();
        });
        await composed.close();
        await database.close();
        logger.info('api stopped');
      })();
      return closing;
    },
  };
}

/** `haru api`: runs until SIGINT/SIGTERM, then shuts down gracefully (a second signal exits at once). */
export async function main(): Promise<void> {
  const running = await startApi(process.env);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    stopping = true;
    process.stderr.write(`haru api: ${signal}, shutting down\n`);
    running.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
