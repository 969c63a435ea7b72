import { Context, log } from '@temporalio/activity';
import type { RecordStepInput } from './fleet-store';

/**
 * Where a step activity records its progress: the operation (null for a promotion's demotion child),
 * the domain, and the step's name in the operation's plan.
 */
export interface StepJournal {
  fleetId: string;
  operationId: string | null;
  domainId: string;
  step: string;
}

/** A step activity's input, optionally carrying the journal it records into. */
export type Journaled<I> = I & { journal?: StepJournal };

/**
 * Wraps a step activity so that, given a `journal`, it records `started` before its work and `succeeded`
 * (with `describe(result)`) after it, in the same activity: one Temporal round trip per step instead of
 * three (docs/performance.md). Every attempt sets the operation's current step and throws OperationClosed
 * before any effect when the operation is no longer in flight; the first also appends the `started` event. A
 * `succeeded` that cannot be written is logged, never thrown: the effect happened. A failure is not
 * recorded here: only the workflow knows when the step budget is spent.
 */
export function withJournal<I extends object, R>(
  recordStep: (input: RecordStepInput) => Promise<void>,
  describe: (result: R) => string,
  run: (input: I) => Promise<R>,
): (input: Journaled<I>) => Promise<R> {
  return async (input) => {
    const { journal } = input;
    if (!journal) return run(input);
    // Every attempt checks the operation is still in flight and names the step on its row; only the first
    // writes the `started` event (a dead host's step may be retried a dozen times within its budget).
    await recordStep({
      ...journal,
      status: 'started',
      message: `${journal.step} started`,
      appendEvent: Context.current().info.attempt === 1,
    });
    const result = await run(input);
    const reported = (result as { attempt?: unknown }).attempt;
    // The effect is done (for commitRouting: routing moved): a lost `succeeded` event must not fail the
    // step, or the workflow would compensate an effect that happened. The workflow's progress still says it.
    await recordStep({
      ...journal,
      status: 'succeeded',
      message: describe(result),
      data: {
        ...(typeof reported === 'number' ? { attempt: reported } : {}),
        // All attempts: from the first one's scheduling to now.
        durationMs: Math.max(0, Date.now() - Context.current().info.scheduledTimestampMs),
      },
    }).catch((err: unknown) =>
      log.warn('step succeeded but its event was not recorded', {
        ...journal,
        error: err instanceof Error ? err.message : String(err),
      }),
    );
    return result;
  };
}
