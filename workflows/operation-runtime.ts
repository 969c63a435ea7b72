import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  isCancellation,
  log,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { OperationProgress } from '../schemas/api';
import type { Activities } from '../activities';
import type { StepJournal } from '../activities/step-journal';
import { ABORTED_ERROR_CODE, FailureType, NON_RETRYABLE_FAILURES } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import { bookkeepingActivities } from './activity-options';
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
  /** Null for a promotion's demotion child: no row to begin or finish. */
  operationId: string | null;
  domainId: string;
  kind: 'promote' | 'demote';
}

/** How a workflow names itself in the failure it ends with: `promotion failed at …`, `PromotionAborted`. */
const WORKFLOW_NAMES = {
  promote: { noun: 'promotion', type: 'Promotion' },
  demote: { noun: 'demotion', type: 'Demotion' },
} as const;

/** The pause between two bookkeeping calls that each spent their budget on an unreachable store. */
const BOOKKEEPING_PAUSE = '5s';

/** The budget of a bookkeeping call before the fleet policy is known (the policy's default). */
const DEFAULT_BOOKKEEPING_BUDGET_MS = 60_000;

/**
 * Whether a failed bookkeeping call may simply be made again: its budget ran out on a transient error
 * (an unreachable store). A refusal (a non-retryable failure type) is an answer, not an outage.
 */
function isOutage(err: unknown): boolean {
  if (!(err instanceof ActivityFailure)) return false;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) {
    return !cause.nonRetryable && !(NON_RETRYABLE_FAILURES as readonly string[]).includes(cause.type ?? '');
  }
  return true;
}

/**
 * The bookkeeping every operation workflow shares: the `progress` query, the `abort` signal, `begin`,
 * one way to run a step (`step`, `run`: the step is recorded on the operation row and as events, raced
 * against an abort while `isAbortable`, and any failure becomes a StepFailure), and one way to end
 * (`finishSucceeded`, `finishFailed`). Must be created first thing in the workflow so the handlers exist
 * before the first await.
 */
export function createOperationRuntime(opts: OperationRuntimeOptions) {
  let progress: OperationProgress = createProgress(opts.operationId ?? opts.domainId, opts.kind, []);
  let abortReason: string | null = null;
  let isAbortable = true;
  const names = WORKFLOW_NAMES[opts.kind];
  let bookkeeper = bookkeepingActivities(DEFAULT_BOOKKEEPING_BUDGET_MS);
  setHandler(progressQuery, () => progress);
  setHandler(abortSignal, (request) => {
    abortReason ??= request?.reason ?? 'abort requested';
    progress = abortRequested(progress);
  });

  /**
   * The one way the operation writes its own records: never cancelled, and made again after a pause for as
   * long as the store stays unreachable (a call that failed the execution would skip compensation and leave
   * the row `running`).
   */
  const bookkeep = <T>(what: string, write: (store: Activities) => Promise<T>): Promise<T> =>
    CancellationScope.nonCancellable(async () => {
      for (let calls = 1; ; calls++) {
        try {
          return await write(bookkeeper);
        } catch (err) {
          if (!isOutage(err)) throw err;
          log.warn('state store unreachable for bookkeeping; calling again', {
            fleetId: opts.fleetId,
            operationId: opts.operationId,
            what,
            calls,
            error: err instanceof Error ? err.message : String(err),
          });
          await sleep(BOOKKEEPING_PAUSE);
        }
      }
    });

  const record = (step: string, status: 'started' | 'succeeded' | 'failed' | 'skipped', message: string, data = {}) =>
    bookkeep(`${step} ${status}`, (store) =>
      store.recordStep({
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

  /**
   * The one way a step runs: refused at once while an abort is pending, tracked in `progress`, a failure
   * recorded and thrown as StepFailure. `work` records the step's start and success (in its step activity's
   * journal, or through `recordedHere`).
   */
  async function execute<T>(step: string, work: () => Promise<T>): Promise<T> {
    if (isAbortable && abortReason !== null) {
      throw new StepFailure(step, { code: ABORTED_ERROR_CODE, message: abortReason }, true);
    }
    progress = stepStarted(progress, step, now());
    try {
      // Inside the try: an operation closed under us (OperationClosed) fails the step like any other error.
      const result = await work();
      progress = stepSucceeded(progress, step, now(), attemptOf(result));
      return result;
    } catch (err) {
      const isAbort = abortReason !== null && isCancellation(err);
      const info: FailureInfo = isAbort ? { code: ABORTED_ERROR_CODE, message: abortReason! } : describeFailure(err);
      progress = stepFailed(progress, step, now(), `${info.code}: ${info.message}`, info.attempts);
      await record(step, 'failed', `${step} failed: ${info.message}`, { code: info.code });
      throw new StepFailure(step, info, isAbort);
    }
  }

  /** Work that is not one step activity, recorded by the workflow: `started`, `fn` (abortable), `succeeded`. */
  async function recordedHere<T>(step: string, fn: () => Promise<T>, describe: (result: T) => string): Promise<T> {
    await record(step, 'started', `${step} started`);
    const result = await abortable(fn);
    const attempt = attemptOf(result);
    await record(step, 'succeeded', describe(result), attempt === undefined ? {} : { attempt });
    return result;
  }

  const run = <T>(step: string, fn: () => Promise<T>, describe: (result: T) => string = () => `${step} done`) =>
    execute(step, () => recordedHere(step, fn, describe));

  /** A record the work goes on without: an operation row someone else closed (OperationClosed) is only logged. */
  const recordUnlessClosed = async (...args: Parameters<typeof record>): Promise<void> => {
    try {
      await record(...args);
    } catch (err) {
      if (!isOperationClosed(err)) throw err;
      log.warn('operation closed meanwhile; going on without the record', {
        fleetId: opts.fleetId,
        operationId: opts.operationId,
        step: args[0],
        status: args[1],
      });
    }
  };

  /** Writes the operation's outcome on its row (a demotion child has none); an abort cannot cut it short. */
  const finish = (
    outcome: 'succeeded' | 'failed' | 'cancelled',
    error?: { step: string; code: string; message: string },
  ) =>
    opts.operationId
      ? bookkeep(`finish ${outcome}`, (store) =>
          store.finishOperation({ fleetId: opts.fleetId, operationId: opts.operationId!, outcome, error }),
        ).then(() => undefined)
      : Promise.resolve();

  return {
    get progress(): OperationProgress {
      return progress;
    },
    get abortReason(): string | null {
      return abortReason;
    },
    /** Gives bookkeeping calls the fleet policy's budget (known once the operation has begun). */
    usePolicy(policy: FleetPolicy): void {
      // A policy recorded before the field existed has none: the default applies.
      bookkeeper = bookkeepingActivities(policy.bookkeepingBudgetMs ?? DEFAULT_BOOKKEEPING_BUDGET_MS);
    },
    /**
     * A read or write of the store the workflow needs in order to go on (the commit re-read): outlasts an
     * outage like the operation's own records.
     */
    bookkeep,
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
     * Runs work that is not one step activity (a compensation of several, a child workflow) as a step: the
     * workflow records it started, runs `fn` (abortable), records success with the attempt the result
     * reports, or records the failure and throws StepFailure. Throws StepFailure at once, without running
     * `fn`, when an abort is already pending.
     */
    run,
    /**
     * Runs one step activity that records its own `started` and `succeeded` (activities/step-journal.ts):
     * `call` gets the journal to pass it. Failures and a pending abort are handled as in `run`.
     */
    step<T>(step: string, call: (journal: StepJournal) => Promise<T>): Promise<T> {
      const journal: StepJournal = {
        fleetId: opts.fleetId,
        operationId: opts.operationId,
        domainId: opts.domainId,
        step,
      };
      return execute(step, () => abortable(() => call(journal)));
    },
    /**
     * Runs the workflow's opening activities (start the operation, check the target). A refusal fails the
     * operation at step `begin`, unless someone else closed it already, and fails the execution with
     * `<workflow> refused: …` typed by the refusal's code.
     */
    async begin<T>(start: () => Promise<T>): Promise<T> {
      try {
        return await start();
      } catch (err) {
        const info = describeFailure(err);
        const error = { step: 'begin', code: info.code, message: info.message };
        if (info.code !== FailureType.OperationClosed) await finish('failed', error);
        progress = withPhase(progress, 'failed');
        throw ApplicationFailure.nonRetryable(`${names.noun} refused: ${info.message}`, info.code, error);
      }
    },
    /**
     * Runs a compensation as step `step`: never cancelled, and never stopped by its own records, so a row
     * that someone else closed meanwhile (OperationClosed on the `started` record) still gets its hosts put
     * back. Returns the result, or null when `fn` failed (recorded, logged, not thrown: the operation's
     * outcome is the failure that led here).
     */
    async compensate<T>(step: string, fn: () => Promise<T>, describe: (result: T) => string): Promise<T | null> {
      progress = stepStarted(progress, step, now());
      await recordUnlessClosed(step, 'started', `${step} started`);
      try {
        const result = await CancellationScope.nonCancellable(fn);
        progress = stepSucceeded(progress, step, now(), attemptOf(result));
        await recordUnlessClosed(step, 'succeeded', describe(result));
        return result;
      } catch (err) {
        const info = describeFailure(err);
        progress = stepFailed(progress, step, now(), `${info.code}: ${info.message}`, info.attempts);
        await recordUnlessClosed(step, 'failed', `${step} failed: ${info.message}`, { code: info.code });
        log.error('compensation failed', { fleetId: opts.fleetId, operationId: opts.operationId, error: info.message });
        return null;
      }
    },
    /**
     * Ends the operation as succeeded; `bestEffort`: a best-effort step that failed (kept on the row as its
     * `error`, so a reader sees a promotion that left its old active undemoted without reading events).
     */
    async finishSucceeded(bestEffort?: { step: string; code: string; message: string }): Promise<void> {
      await finish('succeeded', bestEffort);
      progress = withPhase(progress, 'succeeded');
    },
    /**
     * Ends the operation after `failure`: cancelled when it was aborted or cancelled, failed otherwise, with
     * `{ step, code, message }`. Throws what the execution ends with: a CancelledFailure for a cancellation
     * from outside, else `<Workflow>Aborted` or `<Workflow>Failed`.
     */
    async finishFailed(failure: StepFailure): Promise<never> {
      const isCancel = failure.isAbort || failure.info.code === 'Cancelled';
      const error = { step: failure.step, code: failure.info.code, message: failure.info.message };
      await finish(isCancel ? 'cancelled' : 'failed', error);
      progress = withPhase(progress, isCancel ? 'cancelled' : 'failed');
      if (isCancel && !failure.isAbort) throw new CancelledFailure(`${names.noun} cancelled`);
      throw ApplicationFailure.nonRetryable(
        `${names.noun} ${failure.isAbort ? 'aborted' : 'failed'} at ${failure.step}: ${failure.info.message}`,
        `${names.type}${failure.isAbort ? 'Aborted' : 'Failed'}`,
        error,
      );
    },
  };
}

export type OperationRuntime = ReturnType<typeof createOperationRuntime>;

const isOperationClosed = (err: unknown): boolean =>
  err instanceof ActivityFailure &&
  err.cause instanceof ApplicationFailure &&
  err.cause.type === FailureType.OperationClosed;

/** The attempt a step activity's result reports, if any. */
function attemptOf(result: unknown): number | undefined {
  const attempt = (result as { attempt?: unknown } | undefined)?.attempt;
  return typeof attempt === 'number' ? attempt : undefined;
}
