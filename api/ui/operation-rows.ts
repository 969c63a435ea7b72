import { lastFailedOperation } from '../../core/last-failed-operation';
import type { OperationProgress, StepProgress } from '../../schemas/api';
import type { OperationKind, OperationState } from '../../schemas/enums';
import type { Operation } from '../../schemas/entities';
import { agoOf, durationText } from './ages';
import type { Tone } from './domain-rows';
import { type TemporalUi, temporalWorkflowUrl } from './temporal-link';

/** How many of the newest operations the page lists, each with its steps (one `progress` query each). */
export const SHOWN_OPERATIONS = 5;

/** One step of an operation with how long it took (or has taken so far). */
export interface StepRow {
  name: string;
  status: StepProgress['status'];
  tone: Tone;
  /** `1.2 s`, `3.4 s so far` while it runs; null when it never started. */
  duration: string | null;
  /** Attempts past the first, and the step's last error (a skipped step's reason) unless it succeeded. */
  note: string | null;
}

/** One operation as the fleet page shows it. */
export interface OperationRow {
  id: string;
  kind: OperationKind;
  /** The target domain's slug (its id when the fleet no longer has it); `from`: the active it replaced. */
  target: string;
  from: string | null;
  outcome: OperationState;
  /** The outcome as read: `succeeded (not demoted)` for a promotion whose old active's demotion failed. */
  outcomeText: string;
  tone: Tone;
  /** Since it was requested: `3 s ago`. */
  age: string;
  /** From its start (its request, if it never started) to its end (`12.3 s`), or to now while in flight (`… so far`). */
  duration: string;
  reason: string;
  requestedBy: string;
  workflowId: string;
  /** Its page in the Temporal Web UI; null when the API does not know where that runs (HARU_TEMPORAL_UI_URL). */
  workflowUrl: string | null;
  /**
   * `step: code: message` of a failed or cancelled one, or of the failed demotion of a succeeded promotion's old
   * active (its best-effort last step: the row keeps that failure, workflows/promotion.ts).
   */
  error: string | null;
  /** Its steps as the workflow's `progress` query answered; null when the workflow did not answer. */
  steps: StepRow[] | null;
}

/**
 * Which operations the page shows (`operations` newest first): the newest SHOWN_OPERATIONS, and the last failed
 * one (`lastFailedOperation`, as `haru fleet status` finds it), which may be older. Pure.
 */
export function operationsToShow(operations: readonly Operation[]): {
  shown: Operation[];
  lastFailed: Operation | null;
} {
  return { shown: operations.slice(0, SHOWN_OPERATIONS), lastFailed: lastFailedOperation(operations) };
}

/** From `startedAt` to `finishedAt`, or to `now` (`… so far`). */
function elapsed(startedAt: string, finishedAt: string | null, now: Date): string {
  const end = finishedAt ? Date.parse(finishedAt) : now.getTime();
  return `${durationText(end - Date.parse(startedAt))}${finishedAt ? '' : ' so far'}`;
}

const OUTCOME_TONE: Record<OperationState, Tone> = {
  pending: 'warn',
  running: 'warn',
  succeeded: 'ok',
  failed: 'bad',
  cancelled: 'warn',
};

/** A step of the `progress` query as a row, timed at `now`. Pure. */
export function stepRow(step: StepProgress, now: Date): StepRow {
  const note = [
    step.attempts > 1 ? `${step.attempts} attempts` : '',
    step.status !== 'succeeded' && step.lastError ? step.lastError : '',
  ].filter(Boolean);
  return {
    name: step.step,
    status: step.status,
    tone: step.status === 'failed' ? 'bad' : step.status === 'running' ? 'warn' : 'ok',
    duration: step.startedAt ? elapsed(step.startedAt, step.finishedAt, now) : null,
    note: note.length ? note.join('; ') : null,
  };
}

/**
 * An operation as a row at `now`, with its steps from `progress` (null or undefined: no answer), its domains
 * named by `slugOf`. Pure.
 */
export function operationRow(
  op: Operation,
  progress: OperationProgress | null | undefined,
  slugOf: (domainId: string) => string,
  now: Date,
  temporalUi: TemporalUi | null = null,
): OperationRow {
  const isNotDemoted = op.kind === 'promote' && op.state === 'succeeded' && op.error !== null;
  return {
    id: op.id,
    kind: op.kind,
    target: slugOf(op.targetDomainId),
    from: op.fromDomainId && slugOf(op.fromDomainId),
    outcome: op.state,
    outcomeText: isNotDemoted ? `${op.state} (not demoted)` : op.state,
    tone: isNotDemoted ? 'warn' : OUTCOME_TONE[op.state],
    age: agoOf(op.createdAt, now),
    duration: elapsed(op.startedAt ?? op.createdAt, op.finishedAt, now),
    reason: op.reason,
    requestedBy: op.requestedBy,
    workflowId: op.workflowId,
    workflowUrl: temporalUi && temporalWorkflowUrl(temporalUi, op.workflowId),
    error: op.error ? `${op.error.step}: ${op.error.code}: ${op.error.message}` : null,
    steps: progress ? progress.steps.map((s) => stepRow(s, now)) : null,
  };
}
