import { and, asc, eq, or, type SQL, sql } from 'drizzle-orm';
import { IN_FLIGHT_OPERATION_STATES } from '../../schemas/enums';
import type { AutoFailoverPause, Fleet, FleetSnapshot } from '../../schemas/entities';
import { type DomainRow, events, fleets, type OperationRow, type SlotRow } from '../schema';
import { toDomain, toFleet, toOperation, toSlot } from './mappers';
import { commitRouting, type CommitRoutingInput, type CommitRoutingResult } from './routing';
import { isUuid, type RepoDeps } from './support';

export type FleetRepo = ReturnType<typeof createFleetRepo>;

/** The outer query's fleet id, always table-qualified (a bare `id` would bind to the subquery's own row). */
const outerFleetId = sql.raw('"fleets"."id"');

/** A row as `to_jsonb` renders it: snake_case keys, timestamps as ISO strings. */
type JsonRow = Record<string, unknown>;

/** Renames a `to_jsonb` row's top-level keys to the drizzle row's camelCase fields (values are kept). */
const camelRow = (row: JsonRow): JsonRow =>
  Object.fromEntries(
    Object.entries(row).map(([k, v]) => [k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase()), v]),
  );

/** Fleets: snapshots (everything to route, decide and display, read in one consistent view) and routing. */
export function createFleetRepo(deps: RepoDeps) {
  const { db } = deps;

  const snapshotQuery = (where: SQL | undefined) =>
    db
      .select({
        fleet: fleets,
        domains: sql<JsonRow[]>`coalesce((
          select json_agg(to_jsonb(d) || jsonb_build_object('slots', coalesce((
            select json_agg(s order by s.gpu_index, s.kind) from slots s where s.domain_id = d.id
          ), '[]'::json)) order by d.slug)
          from domains d where d.fleet_id = ${outerFleetId}
        ), '[]'::json)`,
        operation: sql<JsonRow | null>`(
          select to_jsonb(o) from operations o
          where o.fleet_id = ${outerFleetId} and o.state in (${sql.join(
            IN_FLIGHT_OPERATION_STATES.map((state) => sql`${state}`),
            sql`, `,
          )})
          limit 1
        )`,
      })
      .from(fleets)
      .where(where)
      .orderBy(asc(fleets.slug));
  type SnapshotRow = Awaited<ReturnType<typeof snapshotQuery>>[number];
  type PreparedSnapshot = ReturnType<ReturnType<typeof snapshotQuery>['prepare']>;
  // The fleet monitor reads one fleet's snapshot every round: built once as a prepared statement (drizzle's
  // query building was most of the read's CPU), by id (or slug) and by slug; on first use, not at
  // createStore, since a store is made before anything may touch its database.
  let statements: { byRef: PreparedSnapshot; bySlug: PreparedSnapshot } | undefined;
  const prepared = () => {
    statements ??= {
      byRef: snapshotQuery(or(eq(fleets.id, sql.placeholder('id')), eq(fleets.slug, sql.placeholder('ref')))).prepare(
        'haru_fleet_snapshot_by_ref',
      ),
      bySlug: snapshotQuery(eq(fleets.slug, sql.placeholder('ref'))).prepare('haru_fleet_snapshot_by_slug'),
    };
    return statements;
  };

  const toSnapshots = (rows: SnapshotRow[]): FleetSnapshot[] =>
    rows.map((row) => {
      const fleet = toFleet(row.fleet);
      return {
        ...fleet,
        domains: row.domains.map((d) => ({
          ...toDomain(camelRow(d) as DomainRow),
          slots: (d.slots as JsonRow[]).map((s) => toSlot(camelRow(s) as SlotRow)),
          isActive: d.id === fleet.activeDomainId,
        })),
        inFlightOperation: row.operation ? toOperation(camelRow(row.operation) as OperationRow) : null,
      };
    });
  // One statement, so fleet, domains, slots and the in-flight operation come from one MVCC snapshot
  // without a transaction: postgres.js crashes the process when a query runs on a reserved
  // (transaction) connection whose server went away (porsager/postgres#1208), which a Postgres
  // restart or failover does to every open transaction (test/chaos/postgres-restart.test.ts).
  const snapshots = async (where: SQL | undefined): Promise<FleetSnapshot[]> => toSnapshots(await snapshotQuery(where));

  return {
    /** Every fleet's snapshot, by slug. */
    list: (): Promise<FleetSnapshot[]> => snapshots(undefined),

    /** The snapshot of the fleet named by `ref` (slug or UUID), or null. */
    async snapshot(ref: string): Promise<FleetSnapshot | null> {
      const { byRef, bySlug } = prepared();
      const rows = isUuid(ref) ? await byRef.execute({ id: ref, ref }) : await bySlug.execute({ ref });
      const [snapshot] = toSnapshots(rows);
      return snapshot ?? null;
    },

    /** The fleet's route revision (cheap revalidation of a cached snapshot), or null if it does not exist. */
    async routeRevision(fleetId: string): Promise<number | null> {
      if (!isUuid(fleetId)) return null;
      const [row] = await db.select({ routeRevision: fleets.routeRevision }).from(fleets).where(eq(fleets.id, fleetId));
      return row ? Number(row.routeRevision) : null;
    },

    /**
     * Pauses (`pause` set) or resumes (null) the fleet's automatic failover, and records a `fleet.paused` /
     * `fleet.resumed` event saying who and why. The monitor reads the column on every round, so the pause
     * outlives any monitor run. Repeating the current setting changes nothing and records nothing
     * (`changed: false`). Null when the fleet does not exist.
     */
    async setAutoFailoverPause(
      fleetId: string,
      change: { paused: boolean; by: string; reason?: string | null },
    ): Promise<{ fleet: Fleet; changed: boolean } | null> {
      if (!isUuid(fleetId)) return null;
      const at = deps.now();
      const pause: AutoFailoverPause | null = change.paused
        ? { by: change.by, reason: change.reason ?? null, at: at.toISOString() }
        : null;
      const isPausedNow = sql`${fleets.autoFailoverPause} is not null`;
      const [row] = await db
        .update(fleets)
        .set({ autoFailoverPause: pause, updatedAt: at })
        .where(and(eq(fleets.id, fleetId), change.paused ? sql`not ${isPausedNow}` : isPausedNow))
        .returning();
      if (!row) {
        const [current] = await db.select().from(fleets).where(eq(fleets.id, fleetId));
        return current ? { fleet: toFleet(current), changed: false } : null;
      }
      const verb = change.paused ? 'paused' : 'resumed';
      await db.insert(events).values({
        fleetId,
        type: `fleet.${verb}`,
        message: `automatic failover ${verb} by ${change.by}${change.reason ? `: ${change.reason}` : ''}`,
        data: { by: change.by, reason: change.reason ?? null },
        createdAt: at,
      });
      return { fleet: toFleet(row), changed: true };
    },

    /**
     * Moves the routing pointer for a running promotion: one statement (see routing.ts). Idempotent for
     * the operation that already committed. Throws StoreError `not_found` (operation) for an
     * unknown operation or one of another fleet, `invalid_reference` for malformed domain ids, and
     * `unavailable` when another transaction holds the fleet row.
     */
    commitRouting: (input: CommitRoutingInput): Promise<CommitRoutingResult> => commitRouting(deps, input),
  };
}
