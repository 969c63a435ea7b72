/**
 * An in-memory store over one fleet with the few repository methods supervisor-call activities read and
 * write. Only for tests where the store is incidental to what is tested: a test about the store's SQL,
 * transitions, compare-and-swap or concurrency uses real Postgres (`db/testing.ts`).
 */
import type { Store } from '../../db/store';
import { type PollResult, SIGHTING_NEWER_BY_MS } from '../../db/repo/domains';
import type { DomainSnapshot, FleetSnapshot, Slot } from '../../schemas/entities';
import type { DomainState, SlotState } from '../../schemas/enums';
import { defaultFleetPolicy, type FleetPolicy } from '../../schemas/policy';
import { domainSnapshot, IDS, T0 } from './fleet-fixtures';

export interface FakeStore extends Store {
  state: { fleet: FleetSnapshot; events: { type: string; message: string; data?: Record<string, unknown> }[] };
  slotMoves: { slotId: string; to: SlotState }[];
}

/** An in-memory store over one fleet (active `a`, standby `b`); unimplemented methods throw. */
export function fakeStore(opts: { policy?: Partial<FleetPolicy>; domains?: DomainSnapshot[] } = {}): FakeStore {
  const fleet: FleetSnapshot = {
    id: IDS.fleet,
    slug: 'prod',
    displayName: 'prod',
    activeDomainId: IDS.a,
    routeRevision: 1,
    policy: { ...defaultFleetPolicy(), ...opts.policy },
    createdAt: T0,
    updatedAt: T0,
    inFlightOperation: null,
    domains: opts.domains ?? [domainSnapshot('a'), domainSnapshot('b')],
  };
  const state: FakeStore['state'] = { fleet, events: [] };
  const slotMoves: FakeStore['slotMoves'] = [];
  const findDomain = (id: string) => state.fleet.domains.find((d) => d.id === id) ?? null;
  const strip = (d: DomainSnapshot) => {
    const { slots: _slots, isActive: _isActive, ...domain } = d;
    return domain;
  };
  const notHere = () => {
    throw new Error('not implemented by the fake store');
  };
  const store = {
    fleets: {
      snapshot: async (ref: string) =>
        ref === state.fleet.id || ref === state.fleet.slug
          ? structuredClone({
              ...state.fleet,
              domains: state.fleet.domains.map((d) => ({ ...d, isActive: d.id === state.fleet.activeDomainId })),
            })
          : null,
      list: async () => [structuredClone(state.fleet)],
      routeRevision: async () => state.fleet.routeRevision,
      commitRouting: notHere,
    },
    domains: {
      get: async (id: string) => {
        const d = findDomain(id);
        return d ? structuredClone(strip(d)) : null;
      },
      listByFleet: async () => state.fleet.domains.map((d) => structuredClone(strip(d))),
      transition: async (
        id: string,
        to: DomainState,
        o: { lastError?: string | null; from?: readonly DomainState[] } = {},
      ) => {
        const d = findDomain(id);
        if (!d || d.state === to || (o.from && !o.from.includes(d.state))) return null;
        d.state = to;
        d.stateChangedAt = new Date().toISOString();
        if (o.lastError !== undefined) d.lastError = o.lastError;
        return structuredClone(strip(d));
      },
      // As db/repo/domains.ts writes a poll: a failed one carrying a newer sighting counts from it.
      recordPoll: async (id: string, poll: PollResult) => {
        const d = findDomain(id)!;
        if (poll.ok) Object.assign(d, { lastSeenAt: poll.at.toISOString(), consecutiveFailures: 0, lastError: null });
        else {
          const newer =
            poll.lastSeenAt &&
            (d.lastSeenAt === null || poll.lastSeenAt.getTime() > Date.parse(d.lastSeenAt) + SIGHTING_NEWER_BY_MS);
          Object.assign(d, {
            consecutiveFailures: (newer ? 0 : d.consecutiveFailures) + (poll.failures ?? 1),
            lastError: poll.error ?? 'poll failed',
            ...(newer ? { lastSeenAt: poll.lastSeenAt!.toISOString() } : {}),
          });
        }
        return structuredClone(strip(d));
      },
      recordPolls: async (polls: (PollResult & { domainId: string })[]) =>
        Promise.all(polls.map(({ domainId, ...poll }) => store.domains.recordPoll(domainId, poll))),
    },
    slots: {
      get: notHere,
      listByDomain: async (id: string) => structuredClone(findDomain(id)?.slots ?? []),
      transition: async (slotId: string, to: SlotState) => {
        const slot = state.fleet.domains.flatMap((d) => d.slots).find((s) => s.id === slotId);
        if (!slot || slot.state === to) return null;
        (slot as Slot).state = to as never;
        slotMoves.push({ slotId, to });
        return structuredClone(slot);
      },
      setWakeFingerprints: async (slotId: string, fingerprints: Record<string, unknown>) => {
        const slot = state.fleet.domains.flatMap((d) => d.slots).find((s) => s.id === slotId);
        if (slot?.kind !== 'inference') return false;
        Object.assign(slot, { wakeFingerprints: structuredClone(fingerprints) });
        return true;
      },
    },
    operations: new Proxy({}, { get: () => notHere }),
    events: {
      append: async (e: { type: string; message: string; data?: Record<string, unknown> }) => {
        state.events.push(e);
        return { id: state.events.length, ...e };
      },
      list: notHere,
    },
  };
  return Object.assign(store as unknown as Store, { state, slotMoves });
}
