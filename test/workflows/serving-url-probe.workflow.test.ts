/**
 * The probe through each model's servingUrl, end to end: the real worker, the real dev server, Postgres and two
 * simulated domains. The standby's model answers on its host (the supervisor's loopback probe passes) but its
 * layout servingUrl, where the proxy would send clients, points at a port nothing listens on: the promotion
 * fails at probeModels, not retried, and routing stays where it was.
 */
import { seedLayout } from '../../db/testing';
import { freePort } from '../support/ports';
import {
  MODEL,
  type SimFleet,
  type SimFleetDomain,
  hostState,
  promoteAndWait,
  routingOf,
  startSimFleet,
} from './support/sim-fleet';
import { uniqueTaskQueue, useTestServer } from './support/temporal';
import { startTestWorker } from './support/worker';

jest.setTimeout(120_000);

let fleet: SimFleet;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const taskQueue = uniqueTaskQueue('serving-url');
const server = useTestServer(async () => {
  await worker?.stop();
  await fleet?.close();
});

beforeAll(async () => {
  fleet = await startSimFleet();
  worker = await startTestWorker(server.connection, fleet.db.store, taskQueue);
});

const store = () => fleet.db.store;
const routing = () => routingOf(fleet);
const promote = (target: SimFleetDomain) => promoteAndWait(server, taskQueue, fleet, target);

it('fails the promotion at probeModels when the servingUrl is dead though the host answers; routing unchanged', async () => {
  const deadUrl = `http://127.0.0.1:${await freePort()}/v1`;
  const layout = structuredClone(fleet.layout);
  const west = layout.domains.find((d) => d.slug === 'west')!;
  for (const slot of west.slots) if (slot.kind === 'inference') slot.models[0]!.servingUrl = deadUrl;
  await seedLayout(store(), layout);
  const before = await routing();

  const operation = await promote(fleet.west);
  expect(operation).toMatchObject({ state: 'failed', routingCommitted: false, error: { step: 'probeModels' } });
  expect(operation.error!.code).toBe('ProbeFailed');
  expect(operation.error!.message).toContain(
    `model ${MODEL} answers on its host but not through its servingUrl ${deadUrl} (where the proxy sends its clients)`,
  );
  expect(operation.error!.message).toMatch(/ECONNREFUSED/);
  expect(await routing()).toEqual(before);
  const westHost = await hostState(fleet, fleet.west);
  expect(westHost.models).toEqual(['asleep']);
  expect(westHost.training).toEqual(['running']);

  // The same host with its real servingUrl back in the layout promotes.
  await seedLayout(store(), fleet.layout);
  expect((await promote(fleet.west)).state).toBe('succeeded');
  expect((await routing()).activeDomainId).toBe(fleet.west.id);
});
