import { and, asc, eq, inArray, or, type SQL } from 'drizzle-orm';
import { IN_FLIGHT_OPERATION_STATES } from '../../schemas/enums';
import type { FleetSnapshot } from '../../schemas/entities';
import { domains, fleets, operations, slots } from '../schema';
import { toDomain, toFleet, toOperation, toSlot } from './mappers';
import { commitRouting, type CommitRoutingInput, type CommitRoutingResult } from './routing';
import { isUuid, type RepoDeps } from './support';

export type FleetRepo = ReturnType<typeof createFleetRepo>;

/** Fleets: snapshots (everything to route, decide and display, read in one consistent view) and routing. */
export function createFleetRepo(deps: RepoDeps) {
  const { db } = deps;

  const snapshots = (where: SQL | undefined): Promise<FleetSnapshot[]> =>
    // Repeatable read: fleet, domains, slots and the in-flight operation come from one snapshot.
    db.transaction(
      async (tx) => {
        const fleetRows = await tx.select().from(fleets).where(where).orderBy(asc(fleets.slug));
        if (fleetRows.length === 0) return [];
        const fleetIds = fleetRows.map((f) => f.id);
        const domainRows = await tx
          .select()
          .from(domains)
          .where(inArray(domains.fleetId, fleetIds))
          .orderBy(asc(domains.slug));
        const slotRows = domainRows.length
          ? await tx
              .select()
              .from(slots)
              .where(
                inArray(
                  slots.domainId,
                  domainRows.map((d) => d.id),
                ),
              )
              .orderBy(asc(slots.gpuIndex), asc(slots.kind))
          : [];
        const opRows = await tx
          .select()
          .from(operations)
          .where(
            and(inArray(operations.fleetId, fleetIds), inArray(operations.state, [...IN_FLIGHT_OPERATION_STATES])),
          );
        return fleetRows.map((row) => {
          const fleet = toFleet(row);
          const op = opRows.find((o) => o.fleetId === fleet.id);
          return {
            ...fleet,
            domains: domainRows
              .filter((d) => d.fleetId === fleet.id)
              .map((d) => ({
                ...toDomain(d),
                slots: slotRows.filter((s) => s.domainId === d.id).map(toSlot),
                isActive: d.id === fleet.activeDomainId,
              })),
            inFlightOperation: op ? toOperation(op) : null,
          };
        });
      },
      { isolationLevel: 'repeatable read', accessMode: 'read only' },
    );

  return {
    /** Every fleet's snapshot, by slug. */
    list: (): Promise<FleetSnapshot[]> => snapshots(undefined),

    /** The snapshot of the fleet named by `ref` (slug or UUID), or null. */
    async snapshot(ref: string): Promise<FleetSnapshot | null> {
      const where = isUuid(ref) ? or(eq(fleets.id, ref), eq(fleets.slug, ref)) : eq(fleets.slug, ref);
      const [snapshot] = await snapshots(where);
      return snapshot ?? null;
    },

    /** The fleet's route revision (cheap revalidation of a cached snapshot), or null if it does not exist. */
    async routeRevision(fleetId: string): Promise<number | null> {
      if (!isUuid(fleetId)) return null;
      const [row] = await db.select({ routeRevision: fleets.routeRevision }).from(fleets).where(eq(fleets.id, fleetId));
      return row ? Number(row.routeRevision) : null;
    },

    /**
     * Moves the routing pointer for a running promotion: one statement (see routing.ts). Idempotent for
     * the operation that already committed. Throws HaruError `operation_not_found` for an unknown
     * operation or one of another fleet.
     */
    commitRouting: (input: CommitRoutingInput): Promise<CommitRoutingResult> => commitRouting(deps, input),
  };
}
