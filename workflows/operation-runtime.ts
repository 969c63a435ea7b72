import { CancellationScope, condition, isCancellation, patched, setHandler } from '@temporalio/workflow';
import type { OperationProgress } from '../schemas/api';
import type { Activities } from '../activities';
import type { StepJournal } from '../activities/step-journal';
import { abortSignal, progressQuery } from './definitions';
import { describeFailure, type FailureInfo } from './failure-info';
import {
  abortRequested,
  createProgress,
  stepFailed,
  stepStarted,
  stepSucceeded,
  withPhase,
} from '../core/operation-progress';
import type { PlannedStep } from '../core/step-plan';

/** Thrown by a step that failed or was aborted: carries the step and the reduced failure. */
export class StepFailure extends Error {
  constructor(
    readonly step: string,
    readonly info: FailureInfo,
    readonly isAbort: boolean,
  ) {
    super(`${step}: ${info.code}: ${info.message}`);
    this.name = 'StepFailure';
  }
}

export interface OperationRuntimeOptions {
  fleetId: string;
  operationId: string | null;
  domainId: string;
  kind: string;
  control: Activities;
}

/**
 * Patch id: step activities record their own `started`/`succeeded` (one round trip per step instead of
 * three). Executions recorded before it keep the workflow-side records when they replay.
 */
export const STEPS_RECORD_THEMSELVES = 'steps-record-themselves';

/**
 * The bookkeeping every operation workflow shares: the `progress` query, the `abort` signal, and
 * `run(step, fn)`, which records the step (operation row + event), races it against an abort (only
 * while `isAbortable`), and turns any failure into a StepFailure. Must be created first thing in the
 * workflow so the handlers exist before the first await.
 */
export function createOperationRuntime(opts: OperationRuntimeOptions) {
  let progress: OperationProgress = createProgress(opts.operationId ?? opts.domainId, opts.kind, []);
  let abortReason: string | null = null;
  let isAbortable = true;
  // Decided once, before the first command: an execution either always or never lets steps record themselves.
  const stepsRecordThemselves = patched(STEPS_RECORD_THEMSELVES);
  setHandler(progressQuery, () => progress);
  setHandler(abortSignal, (request) => {
    abortReason ??= request?.reason ?? 'abort requested';
    progress = abortRequested(progress);
  });

  const record = (step: string, status: 'started' | 'succeeded' | 'failed' | 'skipped', message: string, data = {}) =>
    CancellationScope.nonCancellable(() =>
      opts.control.recordStep({
        fleetId: opts.fleetId,
        operationId: opts.operationId,
        domainId: opts.domainId,
        step,
        status,
        message,
        data,
      }),
    );

  /** Runs `fn` in a scope that an abort cancels; rejects with the cancellation when aborted. */
  async function abortable<T>(fn: () => Promise<T>): Promise<T> {
    if (!isAbortable) return fn();
    const work = new CancellationScope();
    const watch = new CancellationScope();
    const watching = watch
      .run(() => condition(() => abortReason !== null))
      .then(
        () => work.cancel(),
        () => undefined,
      );
    try {
      return await work.run(fn);
    } finally {
      watch.cancel();
      await watching;
    }
  }

  const now = () => new Date().toISOString();

  async function execute<T>(
    step: string,
    fn: () => Promise<T>,
    describe: (result: T) => string,
    recordsItself: boolean,
  ): Promise<T> {
    if (isAbortable && abortReason !== null) {
      throw new StepFailure(step, { code: 'Aborted', message: abortReason }, true);
    }
    progress = stepStarted(progress, step, now());
    try {
      // Inside the try: an operation closed under us (OperationClosed) fails the step like any other error.
      if (!recordsItself) await record(step, 'started', `${step} started`);
      const result = await abortable(fn);
      const attempt = (result as { attempt?: unknown } | undefined)?.attempt;
      progress = stepSucceeded(progress, step, now(), typeof attempt === 'number' ? attempt : undefined);
      if (!recordsItself) {
        await record(step, 'succeeded', describe(result), typeof attempt === 'number' ? { attempt } : {});
      }
      return result;
    } catch (err) {
      const isAbort = abortReason !== null && isCancellation(err);
      const info: FailureInfo = isAbort ? { code: 'Aborted', message: abortReason! } : describeFailure(err);
      progress = stepFailed(progress, step, now(), `${info.code}: ${info.message}`, info.attempts);
      await record(step, 'failed', `${step} failed: ${info.message}`, { code: info.code });
      throw new StepFailure(step, info, isAbort);
    }
  }

  return {
    get progress(): OperationProgress {
      return progress;
    },
    get abortReason(): string | null {
      return abortReason;
    },
    /** Installs the plan: every step pending, skipped ones marked (and recorded as events). */
    async plan(steps: readonly PlannedStep<string>[]): Promise<void> {
      progress = createProgress(opts.operationId ?? opts.domainId, opts.kind, steps);
      if (abortReason !== null) progress = abortRequested(progress);
      for (const s of steps)
        if (s.skipReason !== null) await record(s.step, 'skipped', `${s.step} skipped: ${s.skipReason}`);
    },
    /** From here on an abort is ignored (routing is being committed). */
    closeAbortWindow(): void {
      isAbortable = false;
    },
    isStepSkipped(step: string): boolean {
      return progress.steps.find((s) => s.step === step)?.status === 'skipped';
    },
    setPhase(phase: OperationProgress['phase']): void {
      progress = withPhase(progress, phase);
    },
    /**
     * A step that failed turned out to have had its effect (its answer was lost): marks it succeeded in
     * progress and records `message`.
     */
    async recovered(step: string, message: string): Promise<void> {
      progress = stepSucceeded(progress, step, now());
      await record(step, 'succeeded', message);
    },
    /**
     * Runs one step: records it started, runs `fn` (abortable), records success with the attempt the
     * result reports, or records the failure and throws StepFailure. Throws StepFailure at once, without
     * running `fn`, when an abort is already pending. For work that is not one step activity (a
     * compensation of several, a child workflow).
     */
    run<T>(step: string, fn: () => Promise<T>, describe: (result: T) => string = () => `${step} done`): Promise<T> {
      return execute(step, fn, describe, false);
    },
    /**
     * Runs one step activity that records its own `started` and `succeeded` (activities/step-journal.ts):
     * `call` gets the journal to pass it. Executions from before that change record them here instead,
     * with `describe`, so their histories replay. Failures are recorded here either way.
     */
    step<T>(
      step: string,
      call: (journal: StepJournal | undefined) => Promise<T>,
      describe: (result: T) => string,
    ): Promise<T> {
      if (!stepsRecordThemselves) return execute(step, () => call(undefined), describe, false);
      const journal: StepJournal = {
        fleetId: opts.fleetId,
        operationId: opts.operationId,
        domainId: opts.domainId,
        step,
      };
      return execute(step, () => call(journal), describe, true);
    },
  };
}

export type OperationRuntime = ReturnType<typeof createOperationRuntime>;
