/**
 * Chaos: the Temporal server goes away in the middle of a promotion. A private dev server with its own
 * SQLite file is stopped while the promotion is inside wakeModels and started again on the same port and
 * file; the `haru worker` process rides it out and the promotion completes with one routing move.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { type DevServer, startTemporalDevServer } from '../../cli/temporal-dev-server';
import { freePort } from '../support/ports';
import { complete } from '../workflows/support/sim-fleet';
import { testClients, uniqueTaskQueue } from '../workflows/support/temporal';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(300_000);

let dir: string;
let port: number;
let server: DevServer | undefined;
let connection: Connection | undefined;
let rig: ChaosRig | undefined;

const startServer = () =>
  startTemporalDevServer({
    port,
    dbFilename: path.join(dir, 'temporal.db'),
    headless: true,
    startTimeoutMs: 120_000,
  });

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'haru-chaos-temporal-'));
  port = await freePort();
  server = await startServer();
});
afterAll(async () => {
  await rig?.close();
  await connection?.close();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('completes a promotion across a Temporal server restart (same --db-filename)', async () => {
  // Lazy: the client's channel reconnects on its own once the server is back.
  connection = Connection.lazy({ address: server!.address });
  rig = await startChaosRig({
    temporal: testClients(connection),
    temporalAddress: server!.address,
    taskQueue: uniqueTaskQueue('chaos-temporal'),
    policy: { wakeTimeoutMs: 180_000 },
  });
  const { fleet } = rig;
  await rig.startWorker();
  const before = await rig.routing();
  const model = fleet.west.sim.models[0]!.name;
  // Hold the promotion in wakeModels (the engine acknowledges /wake_up and stays asleep) until the server is back.
  await fleet.west.sim.faults.set(model, { wakeNoop: true });

  const { operation, handle } = await rig.promote(fleet.west);
  await rig.waitForStep(operation.id, 'wakeModels');
  await server!.stop();
  expect(server!.process.exitCode !== null || server!.process.signalCode !== null).toBe(true);
  server = await startServer();
  await fleet.west.sim.faults.clear();

  expect(await handle.result()).toMatchObject({ state: 'succeeded', demotion: 'succeeded' });
  expect(await rig.routing()).toEqual({ activeDomainId: fleet.west.id, routeRevision: before.routeRevision + 1 });
  expect(await fleet.db.store.operations.get(operation.id)).toMatchObject({
    state: 'succeeded',
    routingCommitted: true,
  });
  expect(await complete(fleet.west.servingUrl)).not.toBe('');
  // The worker that lived through the outage did it: no replacement was started.
  expect(rig.workers).toHaveLength(1);
});
