import { eq } from 'drizzle-orm';
import {
  DOMAIN_STATES,
  type DomainState,
  INFERENCE_SLOT_STATES,
  OPERATION_STATES,
  type OperationState,
  type SlotState,
  TRAINING_SLOT_STATES,
} from '../schemas/enums';
import {
  DOMAIN_TRANSITIONS,
  INFERENCE_SLOT_TRANSITIONS,
  InvalidTransitionError,
  OPERATION_TRANSITIONS,
  TRAINING_SLOT_TRANSITIONS,
} from '../schemas/transitions';
import type { HaruDatabase } from './client';
import { testLayout } from './fixtures';
import { domains, operations, slots } from './schema';
import { createStore } from './store';
import { createTestDatabase, seedLayout, type TestDatabase } from './testing';

/**
 * Every (from, to) pair of every transition table, through the repositories against Postgres: the guarded
 * UPDATE moves the row exactly when the table has the edge; a target with no predecessor throws first.
 */

let t: TestDatabase;
let ids: { domain: string; inference: string; training: string; operation: string };

beforeAll(async () => {
  t = await createTestDatabase();
  await seedLayout(t.store, testLayout({ fleet: 'pairs' }));
  const fleet = (await t.store.fleets.snapshot('pairs'))!;
  const west = fleet.domains.find((d) => d.slug === 'west')!;
  const { operation } = await t.store.operations.create({
    fleetId: fleet.id,
    kind: 'promote',
    targetDomainId: west.id,
    reason: 'pairs',
    requestedBy: 'jest',
  });
  ids = {
    domain: west.id,
    inference: west.slots.find((s) => s.kind === 'inference')!.id,
    training: west.slots.find((s) => s.kind === 'training')!.id,
    operation: operation.id,
  };
});
afterAll(() => t?.drop());

const pairs = <S extends string>(states: readonly S[]) =>
  states.flatMap((from) => states.map((to) => [from, to] as const));

describe('domain transitions', () => {
  it.each(pairs(DOMAIN_STATES))('%s -> %s moves exactly when the table allows it', async (from, to) => {
    await t.database.db.update(domains).set({ state: from }).where(eq(domains.id, ids.domain));
    const moved = await t.store.domains.transition(ids.domain, to);
    const allowed = DOMAIN_TRANSITIONS[from].includes(to);
    expect(moved?.state ?? null).toBe(allowed ? to : null);
    expect((await t.store.domains.get(ids.domain))!.state).toBe(allowed ? to : from);
  });

  const otherPredecessors = (from: DomainState, to: DomainState) =>
    DOMAIN_STATES.filter((s) => s !== from && DOMAIN_TRANSITIONS[s].includes(to));
  it.each(pairs(DOMAIN_STATES).filter(([from, to]) => otherPredecessors(from, to).length > 0))(
    '%s -> %s with `from` naming only other states leaves the row alone',
    async (from, to) => {
      await t.database.db.update(domains).set({ state: from }).where(eq(domains.id, ids.domain));
      expect(await t.store.domains.transition(ids.domain, to, { from: otherPredecessors(from, to) })).toBeNull();
      expect((await t.store.domains.get(ids.domain))!.state).toBe(from);
    },
  );

  it('sets the supervisor URL only while the domain is in one of the given states', async () => {
    await t.database.db.update(domains).set({ state: 'stopping' }).where(eq(domains.id, ids.domain));
    const before = (await t.store.domains.get(ids.domain))!.supervisorUrl;
    expect(
      await t.store.domains.setSupervisorUrl(ids.domain, 'http://10.0.0.9:8701', { whileIn: ['provisioning'] }),
    ).toBeNull();
    expect((await t.store.domains.get(ids.domain))!.supervisorUrl).toBe(before);
    await t.database.db.update(domains).set({ state: 'provisioning' }).where(eq(domains.id, ids.domain));
    const moved = await t.store.domains.setSupervisorUrl(ids.domain, 'http://10.0.0.9:8701', {
      whileIn: ['provisioning'],
    });
    expect(moved?.supervisorUrl).toBe('http://10.0.0.9:8701');
  });
});

describe.each([
  ['inference', INFERENCE_SLOT_STATES, INFERENCE_SLOT_TRANSITIONS, 'inference' as const],
  ['training', TRAINING_SLOT_STATES, TRAINING_SLOT_TRANSITIONS, 'training' as const],
] as const)('%s slot transitions', (_kind, states, table, key) => {
  const edges = table as Record<string, readonly string[]>;
  it.each(pairs<SlotState>(states))('%s -> %s moves exactly when the table allows it', async (from, to) => {
    const id = ids[key];
    await t.database.db.update(slots).set({ state: from }).where(eq(slots.id, id));
    const allowed = edges[from]!.includes(to);
    const moved = await t.store.slots.transition(id, to).catch((err: unknown) => err);
    if (moved instanceof InvalidTransitionError) {
      // Only a state no edge of either slot table leads to throws; then it is not an edge here either.
      expect(allowed).toBe(false);
    } else {
      expect((moved as { state: string } | null)?.state ?? null).toBe(allowed ? to : null);
    }
    expect((await t.store.slots.get(id))!.state).toBe(allowed ? to : from);
    // Naming `from` explicitly: an impossible edge throws before any SQL.
    if (!allowed) await expect(t.store.slots.transition(id, to, [from])).rejects.toThrow(InvalidTransitionError);
  });
});

describe('operation transitions', () => {
  const error = { step: 'stopTraining', code: 'test', message: 'test' };
  const call: Record<OperationState, (id: string) => Promise<{ state: string } | null>> = {
    pending: (id) => t.store.operations.transition(id, 'pending'),
    running: (id) => t.store.operations.start(id),
    succeeded: (id) => t.store.operations.succeed(id),
    failed: (id) => t.store.operations.fail(id, error),
    cancelled: (id) => t.store.operations.cancel(id, error),
  };
  it.each(pairs(OPERATION_STATES))('%s -> %s moves exactly when the table allows it', async (from, to) => {
    await t.database.db.update(operations).set({ state: from }).where(eq(operations.id, ids.operation));
    // start() is idempotent by contract: running -> running answers the running operation.
    const allowed = OPERATION_TRANSITIONS[from].includes(to) || (from === 'running' && to === 'running');
    if (to === 'pending') {
      await expect(call[to](ids.operation)).rejects.toThrow(InvalidTransitionError);
    } else {
      expect((await call[to](ids.operation))?.state ?? null).toBe(allowed ? to : null);
    }
    expect((await t.store.operations.get(ids.operation))!.state).toBe(allowed ? to : from);
  });
});

it('throws InvalidTransitionError before any SQL runs', async () => {
  // A database whose every use fails: reaching SQL would surface that error instead.
  const explode = new Proxy(
    {},
    {
      get() {
        throw new Error('SQL was attempted');
      },
    },
  );
  const store = createStore({ db: explode, kind: 'postgres' } as unknown as HaruDatabase);
  const some = '00000000-0000-4000-8000-000000000000';
  await expect(store.operations.transition(some, 'pending')).rejects.toThrow(InvalidTransitionError);
  await expect(store.slots.transition(some, 'serving', ['idle'])).rejects.toThrow(InvalidTransitionError);
  await expect(store.slots.transition(some, 'training', ['serving'])).rejects.toThrow(InvalidTransitionError);
  await expect(store.domains.transition(some, 'nowhere' as never)).rejects.toThrow(InvalidTransitionError);
  await expect(store.domains.transition(some, 'ready', { from: ['stopped'] })).rejects.toThrow(InvalidTransitionError);
});
