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

/** Polls `check` every `intervalMs` until it is truthy; throws naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 60_000,
  intervalMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
