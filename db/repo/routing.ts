import { eq, sql } from 'drizzle-orm';
import { ROUTE_CHANNEL } from '../../schemas/route-push';
import { fleets } from '../schema';
import { pgErrorCode, StoreError } from '../store-error';
import { isUuid, type RepoDeps, rowsOf, timestampParam } from './support';

export interface CommitRoutingInput {
  fleetId: string;
  operationId: string;
  /** The pointer the caller saw (null: no active domain). The commit loses if it moved since. */
  expectedActiveDomainId: string | null;
  targetDomainId: string;
}

export interface CommitRoutingResult {
  /**
   * committed: this call moved the pointer. already_committed: the operation had moved it before (the
   * values are what it wrote). conflict: the pointer moved under the caller, or the operation is not a
   * running promotion to `targetDomainId`; nothing changed and the values are the fleet's current ones.
   */
  outcome: 'committed' | 'already_committed' | 'conflict';
  routeRevision: number;
  activeDomainId: string | null;
}

/** SQLSTATE of a NOWAIT lock that another transaction holds. */
const LOCK_NOT_AVAILABLE = '55P03';

interface CommitRow {
  op_fleet_id: string;
  op_committed: boolean;
  op_revision: string | null;
  op_target: string;
  new_revision: string | null;
  new_active: string | null;
}

/**
 * The routing CAS of docs/architecture.md §3.3 as ONE statement: lock the operation row, move the pointer and bump
 * the revision only if the pointer is still `expected` and the operation is running and uncommitted,
 * mark the operation committed with the revision, and pg_notify. The operation row lock is taken first,
 * so concurrent callers for one operation queue on it and see the committed row when they get it.
 *
 * The fleet row is locked NOWAIT: when another transaction holds it, the statement fails at once (55P03,
 * retried by the activity within its budget) instead of queueing. A queued statement could outlive the
 * step's budget and commit after the workflow had given up and put the target back to sleep: routing
 * would then point at sleeping models.
 */
export async function commitRouting({ db, now }: RepoDeps, input: CommitRoutingInput): Promise<CommitRoutingResult> {
  const { fleetId, operationId, expectedActiveDomainId: expected, targetDomainId: target } = input;
  if (!isUuid(operationId) || !isUuid(fleetId)) {
    throw new StoreError('not_found', `operation ${operationId} does not exist in fleet ${fleetId}`, 'operation');
  }
  if (!isUuid(target) || (expected !== null && !isUuid(expected))) {
    throw new StoreError('invalid_reference', 'commitRouting: domain ids must be UUIDs');
  }
  const at = timestampParam(now());
  const result = await db
    .execute(
      sql`
    with op as (
      select id, fleet_id, kind, state, routing_committed, route_revision, target_domain_id
      from operations where id = ${operationId}::uuid
      for update
    ),
    fleet_row as (
      select id from fleets where id = ${fleetId}::uuid
      for no key update nowait
    ),
    moved as (
      update fleets f
      set active_domain_id = ${target}::uuid, route_revision = f.route_revision + 1, updated_at = ${at}
      from op, fleet_row
      where f.id = fleet_row.id
        and f.active_domain_id is not distinct from ${expected}::uuid
        and op.fleet_id = f.id
        and op.kind = 'promote'
        and op.state = 'running'
        and not op.routing_committed
        and op.target_domain_id = ${target}::uuid
      returning f.id, f.route_revision, f.active_domain_id
    ),
    marked as (
      update operations o
      set routing_committed = true, route_revision = moved.route_revision, updated_at = ${at}
      from moved
      where o.id = ${operationId}::uuid
      returning o.id
    ),
    notified as (
      select pg_notify(${ROUTE_CHANNEL}, json_build_object(
        'fleetId', moved.id, 'revision', moved.route_revision, 'activeDomainId', moved.active_domain_id)::text)
      from moved
    )
    select op.fleet_id::text as op_fleet_id, op.routing_committed as op_committed,
      op.route_revision::text as op_revision, op.target_domain_id::text as op_target,
      moved.route_revision::text as new_revision, moved.active_domain_id::text as new_active,
      (select count(*) from notified) as notified, (select count(*) from marked) as marked
    from op left join moved on true
  `,
    )
    .catch((err: unknown) => {
      if (pgErrorCode(err) !== LOCK_NOT_AVAILABLE) throw err;
      throw new StoreError(
        'unavailable',
        `fleet ${fleetId} is held by another transaction; routing not committed (retried)`,
      );
    });
  const [row] = rowsOf<CommitRow>(result);
  if (!row || row.op_fleet_id !== fleetId) {
    throw new StoreError('not_found', `operation ${operationId} does not exist in fleet ${fleetId}`, 'operation');
  }
  if (row.new_revision !== null) {
    return { outcome: 'committed', routeRevision: Number(row.new_revision), activeDomainId: row.new_active };
  }
  if (row.op_committed) {
    return { outcome: 'already_committed', routeRevision: Number(row.op_revision), activeDomainId: row.op_target };
  }
  // A read after the statement: it sees whichever commit beat this one.
  const [fleet] = await db
    .select({ routeRevision: fleets.routeRevision, activeDomainId: fleets.activeDomainId })
    .from(fleets)
    .where(eq(fleets.id, fleetId));
  return {
    outcome: 'conflict',
    routeRevision: Number(fleet?.routeRevision ?? 0),
    activeDomainId: fleet?.activeDomainId ?? null,
  };
}
