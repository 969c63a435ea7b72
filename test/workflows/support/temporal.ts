import { randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';

let installed = false;

/** Keeps the SDK quiet in tests (warnings and errors only); safe to call from several files in one process. */
export function quietRuntime(): void {
  if (installed) return;
  installed = true;
  try {
    Runtime.install({
      logger: new DefaultLogger('ERROR'),
      shutdownSignals: [],
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
    });
  } catch {
    // Already installed by an earlier file in this jest worker.
  }
}

/** A connection and client to the run's dev server (TEMPORAL_TEST_ADDRESS, set by globalSetup). */
export async function connectTestServer(): Promise<{ connection: NativeConnection; client: Client }> {
  const address = process.env.TEMPORAL_TEST_ADDRESS;
  if (!address) throw new Error('TEMPORAL_TEST_ADDRESS is not set: run the tests through jest (test/global-setup.ts)');
  quietRuntime();
  const connection = await NativeConnection.connect({ address });
  return { connection, client: new Client({ connection }) };
}

/** A task queue no other test uses. */
export const uniqueTaskQueue = (name: string): string => `${name}-${randomUUID().slice(0, 8)}`;

export { eventually } from '../../support/eventually';
