/**
 * Chaos: the active's vLLM engine wedges. Its fake vLLM accepts inference and never answers while `/health`,
 * `/metrics` and the admin endpoints answer as usual: how a stuck engine core looks from outside. Under a client
 * sending one request a second, the supervisor sees requests running while the generation counter stands
 * still; idle, its synthetic completion goes unanswered. Either way the monitor fails over within the targets
 * (docs/architecture.md §9.2: <= 15 s under traffic, <= 30 s idle, with the supervisor's and the policy's
 * defaults), and the fleet fails over again.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { activeOf, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type ChaosRig, domainStateReasons, startChaosRig } from './support/rig';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
const cleanups: (() => Promise<void>)[] = [];
const server = useTestServer(async () => {
  for (const fn of cleanups) await fn().catch(() => undefined);
  await rig?.close();
});

/** A client sending one chat completion a second to `servingUrl` until stopped; each waits up to 60 s. */
function oneRequestASecond(servingUrl: string): () => void {
  const aborts = new Set<AbortController>();
  const send = () => {
    const abort = new AbortController();
    aborts.add(abort);
    const timer = setTimeout(() => abort.abort(), 60_000);
    void fetch(`${servingUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      signal: abort.signal,
    })
      .then((res) => res.text())
      .catch(() => undefined)
      .finally(() => {
        clearTimeout(timer);
        aborts.delete(abort);
      });
  };
  const timer = setInterval(send, 1_000);
  send();
  return () => {
    clearInterval(timer);
    for (const abort of aborts) abort.abort();
  };
}

it('fails over from a wedged active under traffic, then from a wedged idle active', async () => {
  // The default poll policy: a poll every 500 ms, 3 failed polls; the supervisors' default wedge window (10 s).
  const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-wedged'),
    policy,
  });
  const { fleet } = rig;
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  // Under traffic: east's engine hangs while a client keeps sending.
  const stopClient = oneRequestASecond(fleet.east.servingUrl);
  cleanups.push(async () => stopClient());
  await fleet.east.sim.faults.set(MODEL, { hang: true });
  const wedgedAt = Date.now();
  await eventually('routing to move to west', async () => (await activeOf(fleet)) === fleet.west.id, 120_000, 50);
  const underTrafficMs = Date.now() - wedgedAt;
  stopClient();
  const [operation] = await fleet.db.store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  expect(operation!.reason).toMatch(new RegExp(`consecutive polls \\(threshold ${policy.failureThreshold}\\)`));
  expect(await domainStateReasons(fleet, fleet.east.id)).toContainEqual(
    expect.stringMatching(/engine wedged: \d+ running, \d+ waiting, vllm:generation_tokens_total \d+, unchanged for/),
  );

  // Idle: east comes back as a fresh standby, then west's engine hangs with no client at all.
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await fleet.west.sim.faults.set(MODEL, { hang: true });
  const idleWedgedAt = Date.now();
  await eventually('routing to move back to east', async () => (await activeOf(fleet)) === fleet.east.id, 120_000, 50);
  const idleMs = Date.now() - idleWedgedAt;
  expect(await domainStateReasons(fleet, fleet.west.id)).toContainEqual(
    expect.stringMatching(/engine wedged: a synthetic completion \(max_tokens 1\) unanswered/),
  );
  console.log(`wedged engine: routing moved in ${underTrafficMs} ms under traffic, ${idleMs} ms idle`);
  // The targets, with room for a loaded machine: the decision itself comes at about 12 s in both cases.
  expect(underTrafficMs).toBeLessThan(25_000);
  expect(idleMs).toBeLessThan(40_000);
});
