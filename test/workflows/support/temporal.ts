import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createTemporalOrchestrator, type Orchestrator } from '../../../api/orchestrator';

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

/** A Temporal client and the API's orchestrator over one client connection. */
export interface TestClients {
  client: Client;
  /** The API's orchestrator on `taskQueue`: tests start operations through it, as the API does. */
  orchestrator(taskQueue: string): Orchestrator;
}

/** Test clients over `connection` (a server of the test's own, or the run's dev server). */
export function testClients(connection: Connection): TestClients {
  const client = new Client({ connection });
  return {
    client,
    // A loaded test machine answers slower than the API's default deadline assumes.
    orchestrator: (taskQueue) => createTemporalOrchestrator({ connection, client, taskQueue, timeoutMs: 15_000 }),
  };
}

/** The run's dev server: a worker connection beside the test clients. */
export interface TestServer extends TestClients {
  /** For workers (`Worker.create`, `startTestWorker`) and the operator and workflow services. */
  connection: NativeConnection;
  /** Closes both connections; stop the workers on `connection` first. */
  close(): Promise<void>;
}

/** Connects to the run's dev server (TEMPORAL_TEST_ADDRESS, set by globalSetup). */
export async function connectTestServer(): Promise<TestServer> {
  const address = process.env.TEMPORAL_TEST_ADDRESS;
  if (!address) throw new Error('TEMPORAL_TEST_ADDRESS is not set: run the tests through jest (test/global-setup.ts)');
  quietRuntime();
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  return {
    connection,
    ...testClients(clientConnection),
    async close() {
      await clientConnection.close();
      await connection.close();
    },
  };
}

/**
 * The run's dev server for the calling test file: connected in `beforeAll`, closed in `afterAll` after
 * `cleanup` (stopping workers, terminating workflows: whatever still needs the server). Cleanup goes through
 * here because jest runs one scope's `afterAll` hooks in declaration order, so a hook declared after this
 * call would find the connection closed. The fields throw until `beforeAll` has run.
 */
export function useTestServer(cleanup?: () => Promise<void>): TestClients & Pick<TestServer, 'connection'> {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await connectTestServer();
  });
  afterAll(async () => {
    try {
      await cleanup?.();
    } finally {
      await server?.close();
    }
  });
  const connected = (): TestServer => {
    if (!server) throw new Error('the test server connects in beforeAll: use it from hooks and tests');
    return server;
  };
  return {
    get connection() {
      return connected().connection;
    },
    get client() {
      return connected().client;
    },
    orchestrator: (taskQueue) => connected().orchestrator(taskQueue),
  };
}

/** A task queue no other test uses. */
export const uniqueTaskQueue = (name: string): string => `${name}-${randomUUID().slice(0, 8)}`;

export { eventually } from '../../support/eventually';
