/**
 * The wake-fidelity check end to end: the real worker and activities, the real dev server, Postgres, and two
 * simulated domains. A demotion fingerprints the old active's models before sleeping them; a later promotion of
 * that domain has them score the stored answer again, and a model that woke with other weights (the simulator's
 * garbage-after-wake fault) fails the promotion with routing left where it was. Every fake vLLM runs with
 * `--api-key`, so every promotion here also proves the supervisor sends the key from its config.
 */
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
const VLLM_API_KEY = 'sim-vllm-key-0123456789';

let fleet: SimFleet;
let worker: Awaited<ReturnType<typeof startTestWorker>>;
const taskQueue = uniqueTaskQueue('fingerprint');
const server = useTestServer(async () => {
  await worker?.stop();
  await fleet?.close();
});

beforeAll(async () => {
  fleet = await startSimFleet({ vllmApiKey: VLLM_API_KEY });
  worker = await startTestWorker(server.connection, fleet.db.store, taskQueue);
});

const store = () => fleet.db.store;
const routing = () => routingOf(fleet);
const promote = (target: SimFleetDomain) => promoteAndWait(server, taskQueue, fleet, target);
const probeMessage = async (operationId: string) => {
  const events = await store().events.list(fleet.fleetId, { limit: 1_000 });
  const probe = events.find(
    (e) => e.operationId === operationId && e.data.step === 'probeModels' && e.data.status === 'succeeded',
  );
  return probe?.message ?? null;
};
const fingerprintOf = async (domain: SimFleetDomain) => {
  const slots = await store().slots.listByDomain(domain.id);
  const inference = slots.find((s) => s.kind === 'inference');
  return inference?.kind === 'inference' ? (inference.wakeFingerprints?.[MODEL] ?? null) : null;
};

it('the vLLMs run with --api-key: /v1 answers 401 without it', async () => {
  const models = await fetch(`${fleet.east.servingUrl}/models`);
  expect(models.status).toBe(401);
  const keyed = await fetch(`${fleet.east.servingUrl}/models`, {
    headers: { authorization: `Bearer ${VLLM_API_KEY}` },
  });
  expect(keyed.status).toBe(200);
});

it('a first promotion falls back to the non-blank check and says so; the demoted old active is fingerprinted', async () => {
  expect(await fingerprintOf(fleet.west)).toBeNull();
  const operation = await promote(fleet.west);
  expect(operation.state).toBe('succeeded');
  expect(await probeMessage(operation.id)).toContain(`${MODEL}: no stored fingerprint, non-blank check only`);
  const print = await fingerprintOf(fleet.east);
  expect(print).not.toBeNull();
  expect(print!.tokenLogprobs.length).toBeGreaterThan(0);
  expect(print!.text.trim()).not.toBe('');
});

it('garbage after the wake fails the promotion at probeModels with both scores; routing stays where it was', async () => {
  const before = await routing();
  expect(before.activeDomainId).toBe(fleet.west.id);
  await fleet.east.sim.faults.set(MODEL, { garbageAfterWake: true });
  try {
    const operation = await promote(fleet.east);
    expect(operation).toMatchObject({ state: 'failed', routingCommitted: false, error: { step: 'probeModels' } });
    expect(operation.error!.code).toBe('ProbeFailed');
    expect(operation.error!.message).toMatch(
      new RegExp(`wake fidelity check failed: ${MODEL}: .*stored -\\d+\\.\\d+, woken -\\d+\\.\\d+ nats/token`),
    );
    expect(await routing()).toEqual(before);
    const east = await hostState(fleet, fleet.east);
    expect(east.models).toEqual(['asleep']);
    expect(east.training).toEqual(['running']);
  } finally {
    await fleet.east.sim.faults.clear();
  }
});

it('a healthy wake matches the stored fingerprint and the promotion commits', async () => {
  const operation = await promote(fleet.east);
  expect(operation.state).toBe('succeeded');
  expect(await probeMessage(operation.id)).toMatch(new RegExp(`${MODEL}: matches \\(stored -\\d`));
  expect((await routing()).activeDomainId).toBe(fleet.east.id);
});
