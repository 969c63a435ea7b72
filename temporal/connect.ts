import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { TemporalSettings } from './config';
import { checkTemporalTls } from './tls-check';

/**
 * The worker's connection: the TLS settings are checked first (ConfigError naming the one to fix), then
 * `NativeConnection.connect`, which must come before `Worker.create` (it leaks its thread pool when it
 * fails to connect itself).
 */
export async function connectWorkerTemporal(settings: TemporalSettings): Promise<NativeConnection> {
  await checkTemporalTls(settings);
  return NativeConnection.connect(settings.connection);
}

/**
 * The API's lazily connected client connection: the API must come up and serve while Temporal is down, so
 * only a TLS setting that cannot work stops it (ConfigError); an unreachable server is passed to
 * `onUnreachable` and the connection is made on first use.
 */
export async function lazyClientTemporal(
  settings: TemporalSettings,
  opts: { connectTimeoutMs?: number; onUnreachable?: (reason: string) => void } = {},
): Promise<Connection> {
  const tls = await checkTemporalTls(settings);
  if (!tls.ok) opts.onUnreachable?.(tls.reason);
  return Connection.lazy({ ...settings.connection, connectTimeout: opts.connectTimeoutMs });
}
