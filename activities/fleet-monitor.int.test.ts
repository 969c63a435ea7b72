/**
 * The monitor's poll round against real Postgres where it races other writers of a domain's row.
 */
import { eq } from 'drizzle-orm';
import { testLayout } from '../db/fixtures';
import { domains as domainsTable } from '../db/schema';
import { createTestDatabase, seedLayout, type TestDatabase } from '../db/testing';
import type { Store } from '../db/store';
import { FakeHost, quietEnvironment, routedClient, runIn } from './fakes';
import { createFleetMonitorActivities } from './fleet-monitor';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(() => tdb?.drop());

it('does not move a failed standby to ready over a provisioning that started during the round', async () => {
  const { fleetId } = await seedLayout(tdb.store, testLayout({ fleet: 'race-monitor' }));
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const [east, west] = snapshot.domains;
  await tdb.store.domains.transition(west!.id, 'failed', { lastError: 'gone' });
  const hosts = Object.fromEntries(
    snapshot.domains.map((d) => {
      const host = new FakeHost();
      host.models[0]!.state = d.id === east!.id ? 'awake' : 'asleep';
      return [d.supervisorUrl, host];
    }),
  );
  // The standby answers again; meanwhile (after the round read the fleet) a provisioning takes the row.
  const store: Store = {
    ...tdb.store,
    domains: {
      ...tdb.store.domains,
      async recordPolls(polls) {
        await tdb.store.domains.transition(west!.id, 'provisioning', { from: ['failed'] });
        return tdb.store.domains.recordPolls(polls);
      },
    },
  };
  const acts = createFleetMonitorActivities({ store, supervisor: routedClient(hosts), now: () => new Date() });
  await runIn(quietEnvironment({ attempt: 1 }), acts.watchFleet, {
    fleetId,
    isAutoFailoverPaused: false,
    isImmediate: true,
    checkpointMs: 60_000,
    pendingGraceMs: 10_000,
    alreadyTriedIds: [],
    coolingDownIds: [],
  });
  expect((await tdb.store.domains.get(west!.id))!.state).toBe('provisioning');
  const moves = (await tdb.store.events.list(fleetId)).filter((e) => e.type === 'domain.state');
  expect(moves.map((e) => e.message)).not.toContainEqual(expect.stringMatching(/west: failed -> ready/));
});

it('times the degraded grace from continuous watching, not from a degradation recorded before an outage', async () => {
  const { fleetId } = await seedLayout(tdb.store, testLayout({ fleet: 'degraded-grace' }));
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const [east] = snapshot.domains;
  // The active has been degraded for an hour as the store tells it (one of its models asleep).
  await tdb.store.domains.transition(east!.id, 'degraded', { lastError: 'model asleep' });
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await tdb.database.db.update(domainsTable).set({ stateChangedAt: anHourAgo }).where(eq(domainsTable.id, east!.id));
  const hosts = Object.fromEntries(snapshot.domains.map((d) => [d.supervisorUrl, new FakeHost()]));
  const acts = createFleetMonitorActivities({
    store: tdb.store,
    supervisor: routedClient(hosts),
    now: () => new Date(),
  });
  const watch = (over: { watchingSince?: string; lookedUntil?: string }) =>
    runIn(quietEnvironment({ attempt: 1 }), acts.watchFleet, {
      fleetId,
      isAutoFailoverPaused: false,
      isImmediate: false,
      checkpointMs: 300,
      pendingGraceMs: 10_000,
      alreadyTriedIds: [],
      coolingDownIds: [],
      ...over,
    });
  const twoHoursAgo = new Date(Date.now() - 7_200_000).toISOString();
  // Watches that followed one another since before the degradation: the 30 s grace has long run out.
  expect((await watch({ watchingSince: twoHoursAgo, lookedUntil: new Date().toISOString() })).reason).toBe(
    'decision_due',
  );
  // The first watch after an outage (its last look an hour ago): no failover until the grace is watched.
  const resumed = await watch({ watchingSince: twoHoursAgo, lookedUntil: anHourAgo.toISOString() });
  expect(resumed.reason).toBe('checkpoint');
  expect(resumed.fleet.domains.find((d) => d.id === east!.id)).toMatchObject({ state: 'degraded' });
  expect(Date.parse(resumed.watchingSince!)).toBeGreaterThan(Date.now() - 60_000);
});
