import type { OperationProgress, StepProgress } from '../schemas/api';
import type { PlannedStep } from './step-plan';

/**
 * Progress bookkeeping for the `progress` query. Every function returns a new object and leaves its
 * argument untouched, so a query never observes a half-applied change. Times are ISO strings supplied by
 * the caller (workflow time inside a workflow).
 */

/** Fresh progress: every planned step `pending`, skipped ones already `skipped`. */
export function createProgress(
  operationId: string,
  kind: string,
  plan: readonly PlannedStep<string>[],
): OperationProgress {
  return {
    operationId,
    kind,
    phase: 'running',
    abortRequested: false,
    steps: plan.map(({ step, skipReason }) => ({
      step,
      status: skipReason === null ? 'pending' : 'skipped',
      startedAt: null,
      finishedAt: null,
      attempts: 0,
      lastError: skipReason,
    })),
  };
}

function updateStep(
  progress: OperationProgress,
  step: string,
  change: (s: StepProgress) => Partial<StepProgress>,
): OperationProgress {
  const exists = progress.steps.some((s) => s.step === step);
  const base: StepProgress = {
    step,
    status: 'pending',
    startedAt: null,
    finishedAt: null,
    attempts: 0,
    lastError: null,
  };
  const steps = exists ? progress.steps : [...progress.steps, base];
  return { ...progress, steps: steps.map((s) => (s.step === step ? { ...s, ...change(s) } : s)) };
}

/** Marks `step` running from `at`. A step not in the plan (e.g. `compensate`) is appended. */
export function stepStarted(progress: OperationProgress, step: string, at: string): OperationProgress {
  return updateStep(progress, step, (s) => ({
    status: 'running',
    startedAt: s.startedAt ?? at,
    finishedAt: null,
    attempts: Math.max(s.attempts, 1),
  }));
}

/** Marks `step` succeeded at `at`; `attempts` is the activity attempt that succeeded (at least 1). */
export function stepSucceeded(
  progress: OperationProgress,
  step: string,
  at: string,
  attempts?: number,
): OperationProgress {
  return updateStep(progress, step, (s) => ({
    status: 'succeeded',
    finishedAt: at,
    attempts: Math.max(s.attempts, attempts ?? 1),
    lastError: null,
  }));
}

/** Marks `step` failed at `at` with `message`; `attempts` when the failure reported them. */
export function stepFailed(
  progress: OperationProgress,
  step: string,
  at: string,
  message: string,
  attempts?: number,
): OperationProgress {
  return updateStep(progress, step, (s) => ({
    status: 'failed',
    finishedAt: at,
    attempts: Math.max(s.attempts, attempts ?? 1),
    lastError: message,
  }));
}

/** Marks `step` skipped with `reason` (a step that will not run after all, e.g. after an abort). */
export function stepSkipped(progress: OperationProgress, step: string, reason: string): OperationProgress {
  return updateStep(progress, step, () => ({ status: 'skipped', lastError: reason }));
}

/** Records that an abort was asked for. */
export function abortRequested(progress: OperationProgress): OperationProgress {
  return { ...progress, abortRequested: true };
}

/** Moves the operation to `phase`; steps still pending become skipped once the phase is terminal. */
export function withPhase(progress: OperationProgress, phase: OperationProgress['phase']): OperationProgress {
  const isTerminal = phase === 'succeeded' || phase === 'failed' || phase === 'cancelled';
  return {
    ...progress,
    phase,
    steps: isTerminal
      ? progress.steps.map((s) =>
          s.status === 'pending' ? { ...s, status: 'skipped', lastError: `operation ${phase}` } : s,
        )
      : progress.steps,
  };
}

/** The steps that have started (running, succeeded or failed), in plan order. */
export function startedSteps(progress: OperationProgress): string[] {
  return progress.steps.filter((s) => s.startedAt !== null).map((s) => s.step);
}
