import { randomUUID } from 'node:crypto';
import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import type { PgUpdateSetSource } from 'drizzle-orm/pg-core';
import { operationTargetProblem, type TargetDomain } from '../../core/operation-target';
import { operationWorkflowId } from '../../core/workflow-ids';
import type { Operation, OperationError } from '../../schemas/entities';
import {
  IN_FLIGHT_OPERATION_STATES,
  type OperationKind,
  type OperationState,
  type OperationStep,
} from '../../schemas/enums';
import { InvalidTransitionError, OPERATION_TRANSITIONS, predecessorsOf } from '../../schemas/transitions';
import { domains, fleets, operations, slots } from '../schema';
import { toOperation } from './mappers';
import { pgErrorCode, StoreError } from '../store-error';
import { isUuid, type RepoDeps, timestampParam } from './support';

export interface CreateOperationInput {
  fleetId: string;
  kind: OperationKind;
  targetDomainId: string;
  reason: string;
  requestedBy: string;
}

export interface CreateOperationResult {
  /** created: this call inserted it. joined: the same kind and target was already in flight. conflict: another one is. */
  outcome: 'created' | 'joined' | 'conflict';
  /** The created operation, or the one already in flight. */
  operation: Operation;
}

const inFlight = inArray(operations.state, [...IN_FLIGHT_OPERATION_STATES]);
const IN_FLIGHT_INDEX_WHERE = sql.raw(`state in (${IN_FLIGHT_OPERATION_STATES.map((s) => `'${s}'`).join(', ')})`);
const CREATE_ATTEMPTS = 5;

export type OperationRepo = ReturnType<typeof createOperationRepo>;

/** Operations: at most one in flight per fleet (partial unique index), every state change a guarded UPDATE. */
export function createOperationRepo({ db, now }: RepoDeps) {
  const inFlightOf = async (fleetId: string) => {
    const [row] = await db
      .select()
      .from(operations)
      .where(and(eq(operations.fleetId, fleetId), inFlight));
    return row ? toOperation(row) : null;
  };

  /**
   * The fleet (slug, pointer) and the target as the target rule reads them (core/operation-target.ts); null
   * when the fleet does not exist, `target` null when the domain is not one of its domains.
   */
  const targetOf = async (input: CreateOperationInput) => {
    const rows = await db
      .select({
        fleetSlug: fleets.slug,
        activeDomainId: fleets.activeDomainId,
        id: domains.id,
        slug: domains.slug,
        state: domains.state,
        slotKind: slots.kind,
        models: slots.models,
      })
      .from(fleets)
      .leftJoin(domains, and(eq(domains.fleetId, fleets.id), eq(domains.id, input.targetDomainId)))
      .leftJoin(slots, eq(slots.domainId, domains.id))
      .where(eq(fleets.id, input.fleetId));
    const [first] = rows;
    if (!first) return null;
    const target: TargetDomain | null =
      first.id === null || first.slug === null || first.state === null
        ? null
        : {
            id: first.id,
            slug: first.slug,
            state: first.state,
            slots: rows.flatMap((r): TargetDomain['slots'][number][] => {
              if (r.slotKind === 'inference') return [{ kind: 'inference', models: r.models ?? [] }];
              return r.slotKind === 'training' ? [{ kind: 'training' }] : [];
            }),
          };
    return { fleet: { slug: first.fleetSlug, activeDomainId: first.activeDomainId }, target };
  };

  /** Inserts unless the fleet already has one in flight; null then. Target and pointer read in the same statement. */
  const insert = async (input: CreateOperationInput): Promise<Operation | null> => {
    const id = randomUUID();
    const at = now();
    try {
      const [row] = await db
        .insert(operations)
        .values({
          id,
          fleetId: input.fleetId,
          kind: input.kind,
          // NULL when the domain is not in this fleet (pruned since the target rule read it): the NOT NULL
          // constraint then refuses the row. The key share lock keeps a concurrent prune from deleting the
          // target under the new operation.
          targetDomainId: sql`(select ${domains.id} from ${domains} where ${domains.id} = ${input.targetDomainId} and ${domains.fleetId} = ${input.fleetId} for key share)`,
          fromDomainId: sql`(select ${fleets.activeDomainId} from ${fleets} where ${fleets.id} = ${input.fleetId})`,
          reason: input.reason,
          requestedBy: input.requestedBy,
          workflowId: operationWorkflowId(input.fleetId, id),
          createdAt: at,
          updatedAt: at,
        })
        .onConflictDoNothing({ target: operations.fleetId, where: IN_FLIGHT_INDEX_WHERE })
        .returning();
      return row ? toOperation(row) : null;
    } catch (err) {
      const code = pgErrorCode(err);
      if (code === '23502') {
        throw new StoreError('invalid_reference', `domain ${input.targetDomainId} is not in fleet ${input.fleetId}`);
      }
      if (code === '23503') throw new StoreError('not_found', `fleet ${input.fleetId} does not exist`, 'fleet');
      throw err;
    }
  };

  /** One guarded UPDATE to `to`; `alsoFrom` widens the guard (idempotent repeats). */
  const transition = async (
    id: string,
    to: OperationState,
    set: PgUpdateSetSource<typeof operations>,
    alsoFrom: OperationState[] = [],
  ): Promise<Operation | null> => {
    const from = predecessorsOf(OPERATION_TRANSITIONS, to);
    if (from.length === 0) throw new InvalidTransitionError('operation', '*', to);
    if (!isUuid(id)) return null;
    const [row] = await db
      .update(operations)
      .set({ ...set, state: to, updatedAt: now() })
      .where(and(eq(operations.id, id), inArray(operations.state, [...from, ...alsoFrom])))
      .returning();
    return row ? toOperation(row) : null;
  };

  const finish = (id: string, to: 'failed' | 'cancelled', error: OperationError) =>
    transition(id, to, { error, step: error.step, finishedAt: now() });

  return {
    /**
     * Creates a pending operation, unless the fleet already has one in flight: then the same kind and
     * target joins it (same id), anything else is a conflict carrying the in-flight one. Safe under any
     * concurrency: the partial unique index decides. The target is checked by the rule the API and
     * `beginOperation` apply too (core/operation-target.ts, at its `insert` moment: in the fleet; a
     * promotion's serves models). Throws StoreError `invalid_reference` with the rule's message when it
     * fails, `not_found` (fleet) when the fleet does not exist.
     */
    async create(input: CreateOperationInput): Promise<CreateOperationResult> {
      if (!isUuid(input.fleetId)) throw new StoreError('not_found', `fleet ${input.fleetId} does not exist`, 'fleet');
      if (!isUuid(input.targetDomainId)) {
        throw new StoreError('invalid_reference', `domain ${input.targetDomainId} is not in fleet ${input.fleetId}`);
      }
      const found = await targetOf(input);
      if (!found) throw new StoreError('not_found', `fleet ${input.fleetId} does not exist`, 'fleet');
      const problem = operationTargetProblem({
        moment: 'insert',
        kind: input.kind,
        fleet: found.fleet,
        targetRef: input.targetDomainId,
        target: found.target,
      });
      if (problem) throw new StoreError('invalid_reference', problem.message);
      for (let attempt = 0; attempt < CREATE_ATTEMPTS; attempt += 1) {
        const created = await insert(input);
        if (created) return { outcome: 'created', operation: created };
        // The in-flight one may finish between the insert and this read: then try the insert again.
        const current = await inFlightOf(input.fleetId);
        if (!current) continue;
        const same = current.kind === input.kind && current.targetDomainId === input.targetDomainId;
        return { outcome: same ? 'joined' : 'conflict', operation: current };
      }
      throw new Error(`could not create an operation for fleet ${input.fleetId}: the in-flight slot kept changing`);
    },

    /** The operation with this id, or null. */
    async get(id: string): Promise<Operation | null> {
      if (!isUuid(id)) return null;
      const [row] = await db.select().from(operations).where(eq(operations.id, id));
      return row ? toOperation(row) : null;
    },

    /** A fleet's operations, newest first (default 50). */
    async list(fleetId: string, opts: { limit?: number } = {}): Promise<Operation[]> {
      if (!isUuid(fleetId)) return [];
      const rows = await db
        .select()
        .from(operations)
        .where(eq(operations.fleetId, fleetId))
        .orderBy(desc(operations.createdAt), desc(operations.id))
        .limit(opts.limit ?? 50);
      return rows.map(toOperation);
    },

    /** The fleet's pending or running operation, or null. */
    inFlight: (fleetId: string) => (isUuid(fleetId) ? inFlightOf(fleetId) : Promise.resolve(null)),

    /** pending -> running. Idempotent: an already running operation is returned as is (startedAt kept). */
    start: (id: string) =>
      transition(id, 'running', { startedAt: sql`coalesce(${operations.startedAt}, ${timestampParam(now())})` }, [
        'running',
      ]),

    /** Records the step being executed; only while in flight. Null when the operation is not in flight. */
    async setStep(id: string, step: OperationStep | string): Promise<Operation | null> {
      if (!isUuid(id)) return null;
      const [row] = await db
        .update(operations)
        .set({ step, updatedAt: now() })
        .where(and(eq(operations.id, id), inFlight))
        .returning();
      return row ? toOperation(row) : null;
    },

    /**
     * running -> succeeded; `bestEffort`: the failure of a best-effort step it succeeded without (a promotion
     * whose old active was left undemoted), kept as its `error`. Null when the operation is not running.
     */
    succeed: (id: string, bestEffort?: OperationError) =>
      transition(id, 'succeeded', { finishedAt: now(), ...(bestEffort ? { error: bestEffort } : {}) }),

    /** pending|running -> failed with `{ step, code, message }`. Null when already finished. */
    fail: (id: string, error: OperationError) => finish(id, 'failed', error),

    /** pending|running -> cancelled with `{ step, code, message }`. Null when already finished. */
    cancel: (id: string, error: OperationError) => finish(id, 'cancelled', error),

    /** The generic guarded transition, for tests and tools: throws InvalidTransitionError for `pending`. */
    transition: (id: string, to: OperationState) => transition(id, to, {}),
  };
}
