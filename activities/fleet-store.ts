import { log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { operationTargetProblem } from '../core/operation-target';
import { StoreError } from '../db/store-error';
import type { FleetSnapshot, Operation, OperationError } from '../schemas/entities';
import type { OperationKind, OperationState } from '../schemas/enums';
import { FailureType } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import type { ActivityDeps } from './deps';

export interface BeginOperationInput {
  fleetId: string;
  operationId: string;
  kind: OperationKind;
  targetDomainId: string;
}

/** What a workflow needs to plan its steps, read when the operation starts. */
export interface BeginOperationResult {
  /** The operation's state after starting it; a terminal state means there is nothing left to do. */
  state: OperationState;
  isRoutingCommitted: boolean;
  routeRevision: number | null;
  /** The active domain when the operation was created (the one to demote after a promotion). */
  fromDomainId: string | null;
  /** The fleet's slug and the from domain's (search attributes of the old active's demotion); absent in older histories. */
  fleetSlug?: string;
  fromDomainSlug?: string | null;
  policy: FleetPolicy;
  target: DomainSummary;
}

export interface DomainSummary {
  id: string;
  slug: string;
  isActive: boolean;
  inferenceSlotCount: number;
  trainingSlotCount: number;
}

export type StepStatus = 'started' | 'succeeded' | 'failed' | 'skipped';

export interface RecordStepInput {
  fleetId: string;
  /** Null for work outside an operation (the demotion a promotion starts). */
  operationId: string | null;
  domainId: string;
  step: string;
  status: StepStatus;
  message: string;
  data?: Record<string, unknown>;
  /** False: only set the operation's current step (a retried attempt; the first wrote the event). Default true. */
  appendEvent?: boolean;
}

export interface CommitRoutingInput {
  fleetId: string;
  operationId: string;
  expectedActiveDomainId: string | null;
  targetDomainId: string;
}

export interface FinishOperationInput {
  fleetId: string;
  operationId: string;
  outcome: 'succeeded' | 'failed' | 'cancelled';
  /** Why it failed or was cancelled; for a success, the best-effort step it succeeded without. */
  error?: OperationError;
}

const invalidTarget = (message: string, details: Record<string, unknown>) =>
  ApplicationFailure.nonRetryable(message, FailureType.InvalidTarget, details);

/**
 * A store refusal as the failure a workflow sees: a missing row or a bad reference is a non-retryable
 * InvalidTarget, a busy store a retryable StoreUnavailable. Anything else is returned as it came.
 */
function storeFailure(err: unknown, details: Record<string, unknown>): unknown {
  if (!(err instanceof StoreError)) return err;
  switch (err.code) {
    case 'not_found':
    case 'invalid_reference':
      return invalidTarget(err.message, details);
    case 'unavailable':
      return ApplicationFailure.retryable(err.message, FailureType.StoreUnavailable, details);
  }
}

const summarize = (snapshot: FleetSnapshot, domainId: string): DomainSummary | null => {
  const d = snapshot.domains.find((x) => x.id === domainId);
  if (!d) return null;
  return {
    id: d.id,
    slug: d.slug,
    isActive: d.id === snapshot.activeDomainId,
    inferenceSlotCount: d.slots.filter((s) => s.kind === 'inference').length,
    trainingSlotCount: d.slots.filter((s) => s.kind === 'training').length,
  };
};

/** Activities that read and write the state store. Each one is a few guarded statements and safe to repeat. */
export function createFleetStoreActivities(deps: ActivityDeps) {
  const { store } = deps;

  // Slugs never change: metrics label fleets by slug without a read per observation.
  const slugs = new Map<string, string>();
  async function fleetSlug(fleetId: string): Promise<string> {
    const known = slugs.get(fleetId);
    if (known) return known;
    const slug = (await store.fleets.snapshot(fleetId))?.slug ?? fleetId;
    slugs.set(fleetId, slug);
    return slug;
  }
  /** Observes a metric labelled with the fleet's slug; a failed slug read never fails the activity. */
  const observe = (fleetId: string, fn: (fleet: string) => void): Promise<void> =>
    deps.metrics ? fleetSlug(fleetId).then(fn, () => fn(fleetId)) : Promise.resolve();

  async function loadSnapshot(fleetId: string): Promise<FleetSnapshot> {
    const snapshot = await store.fleets.snapshot(fleetId);
    if (!snapshot) throw invalidTarget(`fleet ${fleetId} does not exist`, { fleetId });
    return snapshot;
  }

  return {
    /**
     * Starts an operation (pending -> running, idempotent) and validates its target by the rule the API and
     * the store apply too (core/operation-target.ts, at its `begin` moment): a domain of the fleet; a
     * promotion's serves models and is not already active (unless this very operation committed); a
     * demotion's is not active. Throws non-retryable InvalidTarget when not, OperationClosed when the
     * operation does not exist. A finished operation is returned as is (its target need only be in the fleet).
     */
    async beginOperation(input: BeginOperationInput): Promise<BeginOperationResult> {
      const existing = await store.operations.get(input.operationId);
      if (!existing || existing.fleetId !== input.fleetId) {
        throw ApplicationFailure.nonRetryable(
          `operation ${input.operationId} does not exist in fleet ${input.fleetId}`,
          FailureType.OperationClosed,
        );
      }
      const op = (await store.operations.start(input.operationId)) ?? (await store.operations.get(input.operationId))!;
      const snapshot = await loadSnapshot(input.fleetId);
      const target = summarize(snapshot, input.targetDomainId);
      const result: Omit<BeginOperationResult, 'target'> = {
        state: op.state,
        isRoutingCommitted: op.routingCommitted,
        routeRevision: op.routeRevision,
        fromDomainId: op.fromDomainId,
        fleetSlug: snapshot.slug,
        fromDomainSlug: snapshot.domains.find((d) => d.id === op.fromDomainId)?.slug ?? null,
        policy: snapshot.policy,
      };
      if (target && op.state !== 'running') return { ...result, target };
      const problem = operationTargetProblem({
        moment: 'begin',
        kind: input.kind,
        fleet: snapshot,
        targetRef: input.targetDomainId,
        target: snapshot.domains.find((d) => d.id === input.targetDomainId) ?? null,
        isRoutingCommitted: op.routingCommitted,
      });
      if (problem || !target) {
        throw invalidTarget(problem?.message ?? `domain ${input.targetDomainId} is not in fleet ${snapshot.slug}`, {
          domainId: input.targetDomainId,
          fleetId: input.fleetId,
        });
      }
      await store.events.append({
        fleetId: input.fleetId,
        operationId: op.id,
        domainId: target.id,
        type: 'operation.started',
        message: `${input.kind} of ${target.slug} started`,
        data: { kind: input.kind, reason: op.reason, requestedBy: op.requestedBy },
      });
      return { ...result, target };
    },

    /** Describes a domain of the fleet (for a demotion without an operation). Throws InvalidTarget when unknown. */
    async inspectDomain(input: {
      fleetId: string;
      domainId: string;
    }): Promise<DomainSummary & { policy: FleetPolicy }> {
      const snapshot = await loadSnapshot(input.fleetId);
      const target = summarize(snapshot, input.domainId);
      if (!target) throw invalidTarget(`domain ${input.domainId} is not in fleet ${snapshot.slug}`, input);
      return { ...target, policy: snapshot.policy };
    },

    /**
     * Writes a step's progress: the operation's current step (on `started`) and an `operation.step` event.
     * Throws non-retryable OperationClosed when a step starts on an operation that is no longer in flight
     * (someone finished or cancelled it).
     */
    async recordStep(input: RecordStepInput): Promise<void> {
      if (input.operationId && input.status === 'started') {
        const op = await store.operations.setStep(input.operationId, input.step);
        if (!op) {
          throw ApplicationFailure.nonRetryable(
            `operation ${input.operationId} is no longer in flight`,
            FailureType.OperationClosed,
          );
        }
      }
      const durationMs = input.data?.durationMs;
      if (input.status === 'succeeded' && typeof durationMs === 'number') {
        await observe(input.fleetId, (fleet) =>
          deps.metrics?.stepSucceeded({ fleet, step: input.step }, durationMs / 1000),
        );
      }
      if (input.appendEvent === false) return;
      await store.events.append({
        fleetId: input.fleetId,
        operationId: input.operationId,
        domainId: input.domainId,
        type: 'operation.step',
        message: input.message,
        data: { step: input.step, status: input.status, ...input.data },
      });
    },

    /**
     * Moves the routing pointer with the single-statement CAS. A repeat for an operation that already
     * committed returns what it wrote. Throws non-retryable RouteConflict when the pointer moved under us or
     * the operation is not running, InvalidTarget for an unknown operation or malformed ids, and retryable
     * StoreUnavailable while another transaction holds the fleet row.
     */
    async commitRouting(
      input: CommitRoutingInput,
    ): Promise<{ outcome: 'committed' | 'already_committed'; routeRevision: number }> {
      let result;
      try {
        result = await store.fleets.commitRouting(input);
      } catch (err) {
        throw storeFailure(err, { ...input });
      }
      await observe(input.fleetId, (fleet) => deps.metrics?.routingCommit({ fleet, outcome: result.outcome }));
      if (result.outcome === 'conflict') {
        await store.events.append({
          fleetId: input.fleetId,
          operationId: input.operationId,
          domainId: input.targetDomainId,
          type: 'routing.conflict',
          message: 'routing moved under the promotion; nothing changed',
          data: { expectedActiveDomainId: input.expectedActiveDomainId, activeDomainId: result.activeDomainId },
        });
        throw ApplicationFailure.nonRetryable(
          `routing pointer is ${result.activeDomainId ?? 'unset'} (revision ${result.routeRevision}), expected ${input.expectedActiveDomainId ?? 'unset'}`,
          FailureType.RouteConflict,
          { activeDomainId: result.activeDomainId, routeRevision: result.routeRevision },
        );
      }
      if (result.outcome === 'committed') {
        log.info('routing committed', {
          fleetId: input.fleetId,
          fromDomainId: input.expectedActiveDomainId,
          toDomainId: input.targetDomainId,
          revision: result.routeRevision,
        });
        await store.events.append({
          fleetId: input.fleetId,
          operationId: input.operationId,
          domainId: input.targetDomainId,
          type: 'routing.committed',
          message: `routing moved to the promoted domain (revision ${result.routeRevision})`,
          data: { fromDomainId: input.expectedActiveDomainId, revision: result.routeRevision },
        });
      }
      return { outcome: result.outcome, routeRevision: result.routeRevision };
    },

    /**
     * Whether the operation's routing commit happened, read from its row: what a promotion checks when its
     * commit step failed (a commit whose answer was lost still moved the pointer). OperationClosed when the
     * operation does not exist.
     */
    async readRoutingOutcome(input: {
      fleetId: string;
      operationId: string;
    }): Promise<{ isRoutingCommitted: boolean; routeRevision: number | null }> {
      const op = await store.operations.get(input.operationId);
      if (!op || op.fleetId !== input.fleetId) {
        throw ApplicationFailure.nonRetryable(
          `operation ${input.operationId} does not exist in fleet ${input.fleetId}`,
          FailureType.OperationClosed,
        );
      }
      return { isRoutingCommitted: op.routingCommitted, routeRevision: op.routeRevision };
    },

    /**
     * Ends an operation as succeeded, failed or cancelled and appends `operation.finished`. Idempotent:
     * an operation already finished is left as it is and its state returned.
     */
    async finishOperation(input: FinishOperationInput): Promise<{ state: OperationState }> {
      const error = input.error ?? { step: 'unknown', code: 'unknown', message: input.outcome };
      let op: Operation | null;
      if (input.outcome === 'succeeded') op = await store.operations.succeed(input.operationId, input.error);
      else if (input.outcome === 'failed') op = await store.operations.fail(input.operationId, error);
      else op = await store.operations.cancel(input.operationId, error);
      if (!op) {
        const current = await store.operations.get(input.operationId);
        return { state: current?.state ?? input.outcome };
      }
      const seconds = op.startedAt && op.finishedAt ? (Date.parse(op.finishedAt) - Date.parse(op.startedAt)) / 1000 : 0;
      await observe(input.fleetId, (fleet) =>
        deps.metrics?.operationFinished({ fleet, kind: op.kind, outcome: op.state }, seconds),
      );
      await store.events.append({
        fleetId: input.fleetId,
        operationId: input.operationId,
        domainId: op.targetDomainId,
        type: 'operation.finished',
        message:
          input.outcome !== 'succeeded'
            ? `${op.kind} ${input.outcome} at ${error.step}: ${error.message}`
            : input.error
              ? `${op.kind} succeeded without ${error.step}: ${error.message}`
              : `${op.kind} succeeded`,
        data: { state: op.state, ...(input.outcome === 'succeeded' && !input.error ? {} : { error }) },
      });
      return { state: op.state };
    },

    /** Marks a domain failed (the monitor's decision) with `reason`. `changed: false` when it already was. */
    async markDomainFailed(input: FailedDomain): Promise<{ changed: boolean }> {
      return markFailed(input);
    },

    /**
     * Asks for a promotion on behalf of the monitor, having first marked the failed active (`failedActive`)
     * failed as markDomainFailed does: one activity, so a failover waits for one workflow task fewer before its
     * promotion starts. The unique in-flight index decides: `created`, `joined` (the same promotion is already
     * in flight) or `conflict` (another operation is).
     */
    async requestPromotion(input: {
      fleetId: string;
      targetDomainId: string;
      reason: string;
      failedActive?: { domainId: string; reason: string };
    }): Promise<{ outcome: 'created' | 'joined' | 'conflict'; operation: OperationRef }> {
      if (input.failedActive) await markFailed({ fleetId: input.fleetId, ...input.failedActive });
      const { outcome, operation } = await store.operations.create({
        fleetId: input.fleetId,
        kind: 'promote',
        targetDomainId: input.targetDomainId,
        reason: input.reason,
        requestedBy: 'monitor',
      });
      if (outcome === 'created') {
        await store.events.append({
          fleetId: input.fleetId,
          operationId: operation.id,
          domainId: input.targetDomainId,
          type: 'operation.requested',
          message: `monitor requested promotion: ${input.reason}`,
          data: { kind: 'promote', requestedBy: 'monitor' },
        });
      }
      return { outcome, operation: toOperationRef(operation) };
    },
  };

  /** Marks a domain failed with a `domain.state` event; a domain already failed is left as it is. */
  async function markFailed(input: FailedDomain): Promise<{ changed: boolean }> {
    const domain = await store.domains.transition(input.domainId, 'failed', { lastError: input.reason });
    if (!domain) return { changed: false };
    log.warn('domain failed', { fleetId: input.fleetId, domainId: input.domainId, reason: input.reason });
    await store.events.append({
      fleetId: input.fleetId,
      domainId: input.domainId,
      type: 'domain.state',
      message: `domain ${domain.slug} failed: ${input.reason}`,
      data: { to: 'failed', reason: input.reason },
    });
    return { changed: true };
  }
}

/** A domain to mark failed, and why (the monitor's failure message). */
export interface FailedDomain {
  fleetId: string;
  domainId: string;
  reason: string;
}

/** The part of an operation a workflow needs to start its workflow. */
export interface OperationRef {
  id: string;
  fleetId: string;
  kind: OperationKind;
  targetDomainId: string;
  state: OperationState;
  reason: string;
  requestedBy: string;
}

export const toOperationRef = (op: Operation): OperationRef => ({
  id: op.id,
  fleetId: op.fleetId,
  kind: op.kind,
  targetDomainId: op.targetDomainId,
  state: op.state,
  reason: op.reason,
  requestedBy: op.requestedBy,
});
