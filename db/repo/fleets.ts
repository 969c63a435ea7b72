import { and, asc, eq, or, type SQL, sql } from 'drizzle-orm';
import { IN_FLIGHT_OPERATION_STATES } from '../../schemas/enums';
import type { AutoFailoverPause, Fleet, FleetSnapshot } from '../../schemas/entities';
import { type DomainRow, events, type FleetRow, fleets, type OperationRow, type SlotRow } from '../schema';
import { toDomain, toFleet, toOperation, toSlot } from './mappers';
import { commitRouting, type CommitRoutingInput, type CommitRoutingResult } from './routing';
import { isUuid, type RepoDeps, rowsOf } from './support';

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

/** A fleet's domains (each with its `slots`) and in-flight operation as `to_jsonb` renders them. */
interface JsonSnapshotParts {
  domains: JsonRow[];
  operation: JsonRow | null;
}

/** A snapshot from the fleet's row and the JSON of its domains, slots and in-flight operation. */
function toSnapshot(fleetRow: FleetRow, parts: JsonSnapshotParts): FleetSnapshot {
  const fleet = toFleet(fleetRow);
  return {
    ...fleet,
    domains: parts.domains.map((d) => ({
      ...toDomain(camelRow(d) as DomainRow),
      slots: (d.slots as JsonRow[]).map((s) => toSlot(camelRow(s) as SlotRow)),
      isActive: d.id === fleet.activeDomainId,
    })),
    inFlightOperation: parts.operation ? toOperation(camelRow(parts.operation) as OperationRow) : null,
  };
}

/** The shards' read of one fleet (`watchShards`): the hash of its stored picture, and the picture when it changed. */
export interface WatchedFleetRow {
  fleetId: string;
  /** The watch shard the fleet is dealt to. */
  shard: number;
  /** The fleet's stored version but its domains' sightings: equal hashes, equal snapshots but for `lastSeenAt`. */
  hash: string;
  /** The snapshot, unless the caller already holds the one with this hash (sightings aside). */
  snapshot: FleetSnapshot | null;
}

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

  const toSnapshots = (rows: SnapshotRow[]): FleetSnapshot[] => rows.map((row) => toSnapshot(row.fleet, row));
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

    /**
     * Every fleet of the watch shards `of` (each a number below `shards`; core/watch-shard.ts: a fleet's shard
     * is a hash of its id, `hashtext`, so every worker on this database deals them alike), by id, in one
     * statement: each fleet's shard, its hash, and its snapshot unless `known` lists it with that hash. The
     * hash leaves out what every poll writes (`last_seen_at`, `updated_at`), so a fleet whose polls only
     * refresh its sightings is not sent again (its reader keeps the sightings it writes); a state, a failure
     * count, a slot, an operation's step or a pause changes it.
     */
    async watchShards(input: {
      of: readonly number[];
      shards: number;
      known: readonly { fleetId: string; hash: string }[];
    }): Promise<WatchedFleetRow[]> {
      if (!input.of.every((n) => Number.isInteger(n) && n >= 0))
        throw new Error(`bad shard numbers: ${input.of.join(', ')}`);
      const known = JSON.stringify(input.known.map((k) => ({ id: k.fleetId, hash: k.hash })));
      const inFlight = sql.join(
        IN_FLIGHT_OPERATION_STATES.map((state) => sql`${state}`),
        sql`, `,
      );
      // The hash is the fleet's version, cheap to take every round: its row's and every slot's and the in-flight
      // operation's xmin (a committed row version has its own), and each domain's columns but its sightings
      // (every poll may write those). The snapshot is built only for a fleet whose hash the caller lacks.
      const result = await db.execute(sql`
        select f.id, (hashtext(f.id::text) & 2147483647) % ${input.shards}::int as shard, h.hash,
          case when k.hash is not distinct from h.hash then null else jsonb_build_object(
            'fleet', to_jsonb(f),
            'domains', coalesce((
              select jsonb_agg((to_jsonb(d) - 'updated_at') || jsonb_build_object('slots', coalesce((
                select jsonb_agg(to_jsonb(s) order by s.gpu_index, s.kind) from slots s where s.domain_id = d.id
              ), '[]'::jsonb)) order by d.slug)
              from domains d where d.fleet_id = f.id
            ), '[]'::jsonb),
            'operation', (
              select to_jsonb(o) from operations o where o.fleet_id = f.id and o.state in (${inFlight}) limit 1
            )
          ) end as body
        from fleets f
        cross join lateral (
          select md5(concat_ws('|', f.xmin::text,
            (select string_agg(
              (to_jsonb(d) - 'last_seen_at' - 'updated_at')::text || ':' || coalesce((
                select string_agg(s.xmin::text, ',' order by s.id) from slots s where s.domain_id = d.id
              ), ''), ';' order by d.id)
             from domains d where d.fleet_id = f.id),
            (select string_agg(o.xmin::text, ',') from operations o where o.fleet_id = f.id and o.state in (${inFlight}))
          )) as hash
        ) h
        left join jsonb_to_recordset(${known}::jsonb) as k(id uuid, hash text) on k.id = f.id
        where (hashtext(f.id::text) & 2147483647) % ${input.shards}::int = any(${`{${input.of.join(',')}}`}::int[])
        order by f.id`);
      type Row = {
        id: string;
        shard: number;
        hash: string;
        body: ({ fleet: JsonRow } & JsonSnapshotParts) | null;
      };
      return rowsOf<Row>(result).map((row) => ({
        fleetId: row.id,
        shard: Number(row.shard),
        hash: row.hash,
        snapshot: row.body ? toSnapshot(camelRow(row.body.fleet) as FleetRow, row.body) : null,
      }));
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
