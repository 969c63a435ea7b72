/**
 * Chaos: a region dies while another answers. 20 fleets with auto-failover on, clients sending through the
 * proxy; the actives of 10 fleets live in one simulated host process (the region), everything else in another.
 * The region's process is SIGKILLed: each of its fleets must fail over exactly once, by its monitor, to its
 * standby, and no healthy domain (the 10 live actives, every standby) may be marked failed while 10 promotions
 * load the machine. Then one fleet whose region died gets its old active back as a standby and fails over again.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { regionDeathFigures, type RegionFleet } from '../../bench/support/region-death-figures';
import { type SimHost, startSimHostProcess } from '../../bench/support/sim-host';
import { type ClientOutcome, type SteadyClients, startSteadyClients } from '../../bench/support/steady-clients';
import { createTestDatabase, type TestDatabase } from '../../db/testing';
import type { FleetLayout } from '../../schemas/layout';
import { healthQuery, monitorWorkflowId } from '../../workflows/definitions';
import { startWorkerProcess, type WorkerProcess } from '../support/worker-process';
import { TEST_POLICY } from '../workflows/support/sim-fleet';
import { eventually, uniqueTaskQueue, useTestServer } from '../workflows/support/temporal';
import { type ChaosApi, proxiedCompletion, startChaosApi } from './support/api';
import {
  MANY_FLEETS_MODEL,
  type SeededFleet,
  seedReadyFleets,
  simLayouts,
  terminateMonitors,
  untilEveryDomainPolled,
} from './support/many-fleets';

jest.setTimeout(420_000);

const FLEETS = 20;
const KILLED = 10;

/**
 * Auto-failover on, with the budgets a shared two-core machine needs: 40 simulated supervisors in two processes
 * answer a status read in milliseconds when idle but can take a second under ten promotions, so a poll has 2 s
 * (twice a 1 s interval) and three failed polls fail a domain; a killed host's refusal is confirmed at once
 * whatever the interval. The promotions' steps get wide budgets, as in mass-failover.test.ts.
 */
const POLICY = {
  ...TEST_POLICY,
  autoFailover: true,
  heartbeatIntervalMs: 1_000,
  heartbeatStaleMs: 10_000,
  failureThreshold: 3,
  stopTrainingTimeoutMs: 120_000,
  verifyGpuTimeoutMs: 120_000,
  wakeTimeoutMs: 120_000,
  probeTimeoutMs: 120_000,
  commitTimeoutMs: 60_000,
  drainTimeoutMs: 2_000,
  sleepTimeoutMs: 30_000,
  startTrainingTimeoutMs: 120_000,
};

let db: TestDatabase | undefined;
let worker: WorkerProcess | undefined;
let api: ChaosApi | undefined;
let clients: SteadyClients | undefined;
let stateDir: string | undefined;
const hosts: SimHost[] = [];
const fleets: SeededFleet[] = [];
const server = useTestServer(async () => {
  await clients?.stop();
  await api?.close();
  await worker?.stop();
  await terminateMonitors(server.client, fleets);
  await Promise.all(hosts.map((h) => h.stop()));
  await db?.drop();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

/** Whether `fleet`'s client has had an answer from `domain`; throws the client's last error when it has none. */
function answeredBy(outcomes: readonly ClientOutcome[], fleet: string, domain: string, sinceMs = 0): boolean {
  const own = outcomes.filter((o) => o.fleet === fleet && o.startedAt >= sinceMs);
  if (own.some((o) => o.error === null && o.domain === domain)) return true;
  const last = own.at(-1);
  if (last?.error) throw new Error(`${fleet}: ${last.error}`);
  return false;
}

/** Waits until every fleet's monitor would promote its west now (a viable standby). */
async function untilEveryWestViable(of: readonly SeededFleet[]): Promise<void> {
  await eventually(
    'every monitor to see its west as a viable standby',
    async () => {
      for (const f of of) {
        const health = await server.client.workflow.getHandle(monitorWorkflowId(f.fleetId)).query(healthQuery);
        if (!health?.domains.find((d) => d.domainId === f.westId)?.isViableStandby) return false;
      }
      return true;
    },
    120_000,
    250,
  );
}

it('fails over each of 10 fleets whose region died exactly once, marks none of the 30 healthy domains failed, and fails over again', async () => {
  const taskQueue = uniqueTaskQueue('chaos-region-death');
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'haru-region-death-'));
  db = await createTestDatabase();
  const layouts = await simLayouts(FLEETS, 'region', stateDir, POLICY);
  const isKilled = (slug: string) => layouts.findIndex((l) => l.fleet.slug === slug) < KILLED;
  const inRegion = (f: string, d: string) => d === 'east' && isKilled(f);
  const standby = (_f: string, d: string) => d === 'west';
  // The region: the actives of the first 10 fleets, in a process of their own, so a SIGKILL takes exactly them.
  const region = await startSimHostProcess({ layouts, stateDir, standby, runs: inRegion });
  hosts.push(region);
  hosts.push(await startSimHostProcess({ layouts, stateDir, standby, runs: (f, d) => !inRegion(f, d) }));
  fleets.push(...(await seedReadyFleets(db, layouts)));

  worker = await startWorkerProcess({ databaseUrl: db.url, taskQueue, env: { LOG_LEVEL: 'info' } });
  api = await startChaosApi({ databaseUrl: db.url, temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!, taskQueue });
  await untilEveryDomainPolled(db, fleets);
  await untilEveryWestViable(fleets);

  // A light steady load on every fleet: two requests a second each, through the proxy.
  clients = startSteadyClients({
    apiUrl: api.url,
    fleets: fleets.map((f) => f.slug),
    model: MANY_FLEETS_MODEL,
    everyMs: 500,
  });
  const outcomes = clients.outcomes;
  await eventually(
    'every fleet’s client answered by east',
    () => fleets.every((f) => answeredBy(outcomes, f.slug, 'east')),
    60_000,
    100,
  );

  const killAt = Date.now();
  await region.kill();
  const killed = fleets.filter((f) => isKilled(f.slug));
  const survivors = fleets.filter((f) => !isKilled(f.slug));

  // Every fleet of the region is answered from west, and its promotion has ended.
  await eventually(
    'every fleet of the dead region to fail over to west and its promotion to end',
    async () => {
      for (const f of killed) {
        if (!answeredBy(outcomes, f.slug, 'west')) return false;
        const operations = await db!.store.operations.list(f.fleetId);
        if (operations.length === 0 || operations.some((o) => o.state === 'pending' || o.state === 'running'))
          return false;
      }
      return true;
    },
    300_000,
    250,
  );
  // The survivors' clients are answered after the last failover ended: their actives kept serving through it.
  const settledAt = Date.now();
  await eventually(
    'every surviving fleet answered after the failovers',
    () =>
      survivors.every((f) => outcomes.some((o) => o.fleet === f.slug && o.startedAt > settledAt && o.error === null)),
    60_000,
    100,
  );
  await clients.stop();

  for (const f of killed) {
    // Exactly one failover, the monitor's own, to west; routing moved once.
    const operations = await db.store.operations.list(f.fleetId);
    expect(operations.map((o) => [o.kind, o.requestedBy, o.targetDomainId, o.state, o.routingCommitted])).toEqual([
      ['promote', 'monitor', f.westId, 'succeeded', true],
    ]);
    const snapshot = (await db.store.fleets.snapshot(f.fleetId))!;
    expect([snapshot.activeDomainId, snapshot.routeRevision]).toEqual([f.westId, f.routeRevision + 1]);
    const commits = (await db.store.events.list(f.fleetId, { limit: 1_000 })).filter(
      (e) => e.type === 'routing.committed',
    );
    expect(commits.map((e) => e.operationId)).toEqual([operations[0]!.id]);
  }
  for (const f of survivors) {
    // Nothing started, routing untouched, every request after the kill answered by east.
    expect(await db.store.operations.list(f.fleetId)).toEqual([]);
    const snapshot = (await db.store.fleets.snapshot(f.fleetId))!;
    expect([snapshot.activeDomainId, snapshot.routeRevision]).toEqual([f.eastId, f.routeRevision]);
    const after = outcomes.filter((o) => o.fleet === f.slug && o.startedAt >= killAt);
    expect(after.filter((o) => o.error !== null || o.domain !== 'east').map((o) => o.error ?? o.domain)).toEqual([]);
  }
  // No healthy domain was marked failed, ever: the killed actives are the only failed domains.
  const regionFleets: RegionFleet[] = fleets.map((f) => ({ ...f, isKilled: isKilled(f.slug) }));
  const figures = await regionDeathFigures(db.store, regionFleets, outcomes, killAt);
  expect(figures.healthyMarkedFailed).toEqual([]);
  for (const f of fleets) {
    const states = (await db.store.domains.listByFleet(f.fleetId))
      .map((d) => [d.slug, d.state === 'failed'])
      .sort(([a], [b]) => String(a).localeCompare(String(b)));
    expect(states).toEqual([
      ['east', isKilled(f.slug)],
      ['west', false],
    ]);
  }
  console.log(
    `region death, ${KILLED} of ${FLEETS} fleets: ${figures.killed
      .map((k) => `${k.slug} decided ${k.detectionMs} committed ${k.commitMs} answered ${k.firstAnswerMs} ms`)
      .join('; ')}; client errors after the kill ${figures.killed.reduce((n, k) => n + k.clientErrors, 0)}` +
      ` (${figures.errorSamples.join(' | ') || 'none'})`,
  );

  // And a fleet of the dead region can fail over again: its old active comes back as a standby and takes over.
  const again = killed[0]!;
  const againLayout: FleetLayout = layouts.find((l) => l.fleet.slug === again.slug)!;
  const revivedDir = path.join(stateDir, 'revived');
  mkdirSync(revivedDir);
  hosts.push(
    await startSimHostProcess({
      layouts: [againLayout],
      stateDir: revivedDir,
      standby: () => true,
      runs: (_f, d) => d === 'east',
    }),
  );
  await eventually(
    'the monitor to see the revived east as a viable standby',
    async () =>
      (await server.client.workflow.getHandle(monitorWorkflowId(again.fleetId)).query(healthQuery))?.domains.find(
        (d) => d.domainId === again.eastId,
      )?.isViableStandby,
    120_000,
    250,
  );
  const { outcome, operation } = await db.store.operations.create({
    fleetId: again.fleetId,
    kind: 'promote',
    targetDomainId: again.eastId,
    reason: 'region back',
    requestedBy: 'test',
  });
  expect(outcome).toBe('created');
  await server.orchestrator(taskQueue).startOperation(operation);
  expect(await server.client.workflow.getHandle(operation.workflowId).result()).toMatchObject({
    state: 'succeeded',
    routeRevision: again.routeRevision + 2,
  });
  expect(await proxiedCompletion(api.url, again.slug, MANY_FLEETS_MODEL)).toMatchObject({
    status: 200,
    domain: 'east',
  });
});
