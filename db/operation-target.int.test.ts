import { randomUUID } from 'node:crypto';
import { testLayout } from './fixtures';
import { StoreError } from './store-error';
import { createTestDatabase, seedLayout, type TestDatabase } from './testing';

let tdb: TestDatabase;
beforeAll(async () => {
  tdb = await createTestDatabase();
});
afterAll(() => tdb?.drop());

let fleets = 0;
/** A fleet whose west domain has only a training slot (it serves no model). */
async function fleetWithTrainingOnlyWest() {
  const layout = testLayout({ fleet: `target-${++fleets}` });
  layout.domains[1]!.slots = [layout.domains[1]!.slots[1]!];
  const { fleetId } = await seedLayout(tdb.store, layout);
  const snapshot = (await tdb.store.fleets.snapshot(fleetId))!;
  const id = (slug: string) => snapshot.domains.find((d) => d.slug === slug)!.id;
  return { fleetId, slug: snapshot.slug, east: id('east'), west: id('west') };
}

const create = (fleetId: string, kind: 'promote' | 'demote', targetDomainId: string) =>
  tdb.store.operations.create({ fleetId, kind, targetDomainId, reason: 'test', requestedBy: 'jest' });

const refusal = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StoreError);
  return err as StoreError;
};

describe('the store checks an operation target by the target rule as it inserts the row', () => {
  it('refuses a promotion of a domain that serves no model, and writes no row', async () => {
    const f = await fleetWithTrainingOnlyWest();
    const err = await refusal(create(f.fleetId, 'promote', f.west));
    expect(err).toMatchObject({ code: 'invalid_reference', message: 'domain west has no inference models' });
    expect(await tdb.store.operations.list(f.fleetId)).toEqual([]);
  });

  it('accepts a demotion of that domain (a demotion needs no model)', async () => {
    const f = await fleetWithTrainingOnlyWest();
    expect((await create(f.fleetId, 'demote', f.west)).outcome).toBe('created');
  });

  it("refuses another fleet's domain, naming the fleet by slug", async () => {
    const f = await fleetWithTrainingOnlyWest();
    const other = await fleetWithTrainingOnlyWest();
    const err = await refusal(create(f.fleetId, 'promote', other.east));
    expect(err).toMatchObject({ code: 'invalid_reference', message: `domain ${other.east} is not in fleet ${f.slug}` });
  });

  it('answers not_found for a fleet that does not exist', async () => {
    const err = await refusal(create(randomUUID(), 'promote', randomUUID()));
    expect(err).toMatchObject({ code: 'not_found', entity: 'fleet' });
  });
});
