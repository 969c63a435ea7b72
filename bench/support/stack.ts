import { writeFileSync } from 'node:fs';
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
