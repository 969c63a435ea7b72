/**
 * Chaos: the active's whole host goes dark, its supervisor's port and its model's serving port alike (packets
 * dropped, no RST), which is how a dead region looks from another one: the worker's polls, its refusal check
 * and the proxy's requests all meet silence, never a refusal. Idle, and with a client sending one request a
 * second through the proxy (each sent to the dark model until routing moves), the monitor must decide on its
 * failed polls and move routing to the standby while the host stays dark; the promotion ends while it is still
 * dark (the old active's demotion cannot reach it); then the fleet fails over again.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { MODEL } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, steadyClient, startChaosApi } from './support/api';
import { killAndFailOver, reviveAsStandby, untilViableStandby } from './support/failover-again';
import { type RelayedHost, relayHost } from './support/relayed';
import { type ChaosRig, startChaosRig } from './support/rig';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
let host: RelayedHost | undefined;
const cleanups: (() => Promise<void>)[] = [];
const closeAll = async () => {
  for (const fn of cleanups.splice(0)) await fn().catch(() => undefined);
  await api?.close();
  await host?.close();
  await rig?.close();
  [api, host, rig] = [undefined, undefined, undefined];
};
const server = useTestServer(closeAll);
afterEach(closeAll);

// The default poll policy: a poll every 500 ms, 3 failed polls, stale after 5 s.
const policy = { autoFailover: true, heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000, failureThreshold: 3 };

async function failsOverFromDarkHost(withTraffic: boolean): Promise<void> {
  const taskQueue = uniqueTaskQueue(withTraffic ? 'chaos-dark-host-traffic' : 'chaos-dark-host');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
  });
  const { fleet } = rig;
  // Haru (worker, proxy, probe) reaches east's supervisor and east's model only through relays the test can
  // turn dark; east's supervisor reaches its own engine directly.
  host = await relayHost(fleet, 'east');
  // A proxy that gives up on the dark model's headers in 2 s rather than 60 s: the client's requests end.
  api = await startChaosApi({
    databaseUrl: fleet.db.url,
    temporalAddress: rig.temporalAddress,
    taskQueue,
    config: { HARU_CHAT_HEADER_TIMEOUT_MS: 2_000 },
  });
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);

  const client = withTraffic ? steadyClient(api.url, fleet.layout.fleet.slug, MODEL) : null;
  if (client) {
    cleanups.push(() => client.stop());
    await eventually(
      'a first answer from east through the proxy',
      async () => client.answers.some((a) => a.status === 200 && a.domain === 'east'),
      30_000,
      50,
    );
  }

  // The model's port first, then the supervisor's: each relay refuses for a moment while its dark listener
  // takes the port, and a refusal of both at once would be a confirmed refusal (a killed host), not silence.
  // Dark time is when the supervisor's relay stops relaying.
  await host.model.goDark();
  const darkAt = Date.now();
  await host.supervisor.goDark();
  const darkenedMs = Date.now() - darkAt;
  await eventually(
    'routing to move to west while east stays dark',
    async () => (await rig!.routing()).activeDomainId === fleet.west.id,
    120_000,
    50,
  );
  const movedAt = Date.now();
  const store = fleet.db.store;
  const [operation] = await store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  // Decided on failed polls that each ended at their own deadline: silence, not a confirmed refusal (no port
  // refuses) nor the proxy's missed answers (a degraded grace of 30 s).
  expect(operation!.reason).toMatch(new RegExp(`consecutive polls \\(threshold ${policy.failureThreshold}\\)`));
  const decidedMs = Date.parse(operation!.createdAt) - darkAt;
  let clientLine = '';
  if (client) {
    // The client is answered again, by west.
    const byWest = () => client.answers.filter((a) => a.at > darkAt && a.status === 200 && a.domain === 'west');
    await eventually('a client answered by west three times', async () => byWest().length >= 3, 60_000, 50);
    const firstByWest = byWest()[0]!;
    await client.stop();
    const sinceDark = client.answers.filter((a) => a.at > darkAt);
    const tally = new Map<string, number>();
    for (const a of sinceDark) {
      const key = `${a.status ?? 'no answer'}${a.domain ? ` from ${a.domain}` : ''}`;
      tally.set(key, (tally.get(key) ?? 0) + 1);
    }
    clientLine =
      `; the client first answered by west ${firstByWest.at - darkAt} ms after dark; answers after dark: ` +
      [...tally].map(([key, n]) => `${n}× ${key}`).join(', ');
  }
  console.log(
    `host dark (supervisor and model ports, ${withTraffic ? 'one request a second through the proxy' : 'idle'}): ` +
      `promotion decided in ${decidedMs} ms, routing moved in ${movedAt - darkAt} ms (the supervisor's relay ` +
      `took ${darkenedMs} ms to turn dark)${clientLine}; ` +
      `reason: ${operation!.reason}`,
  );

  // The promotion ends while east is still dark (its demotion fails against silence within its budgets), and
  // nothing else is started: routing stays on west.
  const ended = await eventually(
    'the promotion to end while east stays dark',
    async () => {
      const op = await store.operations.get(operation!.id);
      return op && op.state !== 'pending' && op.state !== 'running' ? op : null;
    },
    180_000,
    100,
  );
  console.log(`host dark: the promotion ended ${ended.state} ${Date.now() - darkAt} ms after dark`);
  expect(ended.state).toBe('succeeded');
  expect((await rig.routing()).activeDomainId).toBe(fleet.west.id);
  expect((await store.operations.list(fleet.fleetId)).filter((o) => o.kind === 'promote')).toHaveLength(1);

  // The fleet can fail over again: east's host comes back as a fresh standby, then west dies.
  await host.restore();
  cleanups.push(await reviveAsStandby(fleet, fleet.east));
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
}

it('fails over from an idle active whose supervisor and model ports went dark, and fails over again', async () => {
  await failsOverFromDarkHost(false);
});

it('fails over from a serving active whose supervisor and model ports went dark, and fails over again', async () => {
  await failsOverFromDarkHost(true);
});
