/**
 * The monitor's poll round against real Postgres where it races other writers of a domain's row.
 */
import { testLayout } from '../db/fixtures';
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
