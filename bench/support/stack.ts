import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, Runtime } from '@temporalio/worker';
import { type DevServer, startTemporalDevServer } from '../../cli/temporal-dev-server';
import { freePort } from '../../test/support/ports';

const quiet = { trace() {}, debug() {}, info() {}, log() {}, warn() {}, error: (m: string) => console.error(m) };

/** A Temporal dev server of the benchmark's own (in memory), or the one at `address` when given. */
export async function startBenchTemporal(
  address?: string,
): Promise<{ address: string; pid: number | null; stop(): Promise<void> }> {
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    shutdownSignals: [],
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
  });
  if (address) return { address, pid: null, stop: async () => undefined };
  const server: DevServer = await startTemporalDevServer({
    port: await freePort(),
    headless: true,
    startTimeoutMs: 120_000,
  });
  return { address: server.address, pid: server.process.pid ?? null, stop: () => server.stop() };
}

/** The workflow bundle, built once per benchmark process (a few seconds). */
let bundle: Promise<{ code: string }> | undefined;
export const workflowBundle = () =>
  (bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger: quiet }).then((b) => ({
    code: b.code,
  })));

/** Writes the workflow bundle to `file` (for `HARU_WORKFLOW_BUNDLE` of a `haru worker` process); returns `file`. */
export async function writeWorkflowBundle(file: string): Promise<string> {
  writeFileSync(file, (await workflowBundle()).code);
  return file;
}

/**
 * What the failover and scale benchmarks share: a Temporal dev server (or `TEMPORAL_ADDRESS`), a client of
 * it with its connection (for deadlines), and the workflow bundle written to a file for `haru worker` processes. `stop` undoes all of it.
 */
export async function startBenchStack() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-'));
  // The server starts while the workflows bundle: the two take about as long.
  const [started, bundled] = await Promise.allSettled([
    startBenchTemporal(process.env.TEMPORAL_ADDRESS || undefined),
    writeWorkflowBundle(path.join(dir, 'workflow-bundle.js')),
  ]);
  if (bundled.status === 'rejected') {
    if (started.status === 'fulfilled') await started.value.stop();
    throw bundled.reason;
  }
  if (started.status === 'rejected') throw started.reason;
  const [temporal, bundle] = [started.value, bundled.value];
  const connection = await Connection.connect({ address: temporal.address });
  return {
    temporal,
    connection,
    client: new Client({ connection }),
    bundle,
    async stop() {
      await connection.close();
      await temporal.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
