/**
 * Chaos: the proxy loses its path to the active's models (a broken load balancer, security group or route:
 * packets dropped, no RST) while the active's supervisor answers healthy to the worker. The proxy's missed
 * answers are evidence: the active is degraded (a `domain.state` event saying the proxy gets no answer from it,
 * the state HaruActiveDomainDown alerts on), and once the degraded grace passes with a viable standby, routing
 * moves to the standby and clients are answered again. Then the path comes back and the fleet fails over again.
 */
import { monitorWorkflowId } from '../../workflows/definitions';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, proxiedCompletion, startChaosApi } from './support/api';
import { killAndFailOver, untilViableStandby } from './support/failover-again';
import { type ChaosRig, startChaosRig } from './support/rig';
import { relayModel } from './support/relayed';
import type { TcpRelay } from './support/tcp-relay';

jest.setTimeout(420_000);

let rig: ChaosRig | undefined;
let api: ChaosApi | undefined;
let relay: TcpRelay | undefined;
let isSending = false;
const server = useTestServer(async () => {
  isSending = false;
  await api?.close();
  await relay?.close();
  await rig?.close();
});

it('degrades an active the proxy cannot reach while its supervisor answers, fails over to the standby, and again', async () => {
  const policy = {
    autoFailover: true,
    heartbeatIntervalMs: 500,
    heartbeatStaleMs: 5_000,
    failureThreshold: 3,
    degradedGraceMs: 3_000,
  };
  const taskQueue = uniqueTaskQueue('chaos-proxy-cut');
  rig = await startChaosRig({
    temporal: server,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue,
    policy,
  });
  const { fleet } = rig;
  const model = fleet.east.sim.models[0]!.name;
  // Clients (and the promotion's probe) reach east's model only through a relay the test can turn dark; the
  // worker reaches east's supervisor directly.
  relay = await relayModel(fleet, 'east');
  api = await startChaosApi({
    databaseUrl: fleet.db.url,
    temporalAddress: rig.temporalAddress,
    taskQueue,
    config: { HARU_CHAT_HEADER_TIMEOUT_MS: 2_000 },
  });
  await rig.startWorker();
  const monitor = server.client.workflow.getHandle(monitorWorkflowId(fleet.fleetId));
  await untilViableStandby(monitor, fleet.west);
  const store = fleet.db.store;
  expect((await proxiedCompletion(api.url, fleet.layout.fleet.slug, model)).domain).toBe('east');

  // Clients keep asking through the proxy while its path to east's model is dark.
  isSending = true;
  const answered: (string | null)[] = [];
  const sending = (async () => {
    while (isSending) {
      const { status, domain } = await proxiedCompletion(api!.url, fleet.layout.fleet.slug, model);
      answered.push(status === 200 ? domain : null);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  await relay.goDark();

  const degraded = await eventually(
    "east degraded on the proxy's missed answers",
    async () =>
      (await store.events.list(fleet.fleetId, { limit: 1_000 })).find(
        (e) => e.type === 'domain.state' && e.domainId === fleet.east.id && /-> degraded/.test(e.message),
      ),
    60_000,
    100,
  );
  expect(degraded.message).toMatch(/the proxy gets no answer from it: model /);
  // Its supervisor answered all along: east was never failed on polls.
  expect((await store.events.list(fleet.fleetId, { limit: 1_000 })).map((e) => e.message).join('\n')).not.toMatch(
    /consecutive polls/,
  );

  await eventually(
    'routing to move to west',
    async () => (await rig!.routing()).activeDomainId === fleet.west.id,
    120_000,
    50,
  );
  const [operation] = await store.operations.list(fleet.fleetId);
  expect(operation).toMatchObject({ kind: 'promote', targetDomainId: fleet.west.id, requestedBy: 'monitor' });
  expect(operation!.reason).toMatch(/degraded/);
  // Clients are answered again, by west.
  await eventually('a client answered by west', async () => answered.includes('west'), 60_000, 50);
  isSending = false;
  await sending;

  // The path comes back; east, demoted to a standby, takes the fleet back when west dies.
  await relay.restore();
  await untilViableStandby(monitor, fleet.east, 180_000);
  await killAndFailOver(fleet, fleet.west, fleet.east);
});
