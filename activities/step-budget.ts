import { Context, type Info } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

/**
 * The end of an activity's whole budget as its own attempt sees it. Temporal enforces schedule-to-close on the
 * server only: the SDK's core times an attempt out locally by its start-to-close and heartbeat timers, never by
 * schedule-to-close (sdk-core `worker/activities.rs`, "Schedule to closed is not tracked"). A lifecycle step's
 * budget is its schedule-to-close, so a retry started late in it would otherwise go on acting on the host after
 * the workflow had seen the step time out and begun its compensation: a wake landing after compensation's
 * sleep leaves a standby awake (docs/architecture.md §4.2).
 *
 * Pure. Returns the epoch ms, on this worker's clock, at which this attempt must stop touching the world: the
 * attempt's own start (`attemptStartedMs`, this clock) plus what its budget had left when the attempt was
 * scheduled, less `leadMs`. What was left is a difference of two of the server's own timestamps (this attempt's
 * scheduling less the first's), so no two hosts' clocks are ever compared: a worker clock ahead of or behind
 * the server's moves nothing. The attempt's wait in the task queue (milliseconds, normally) is not counted; the
 * lead covers it. Null without a schedule-to-close, or when the budget was spent before this attempt was
 * scheduled (the server would not start it; Temporal's own timers stay the only bound).
 */
export function stepDeadlineMs(
  info: Pick<Info, 'scheduledTimestampMs' | 'scheduleToCloseTimeoutMs' | 'currentAttemptScheduledTimestampMs'>,
  attemptStartedMs: number,
): number | null {
  if (!info.scheduleToCloseTimeoutMs || !info.scheduledTimestampMs) return null;
  const spentMs = Math.max(0, (info.currentAttemptScheduledTimestampMs || 0) - info.scheduledTimestampMs);
  const leftMs = info.scheduleToCloseTimeoutMs - spentMs;
  if (leftMs <= 0) return null;
  return attemptStartedMs + leftMs - stepDeadlineLeadMs(info.scheduleToCloseTimeoutMs);
}

/** How early an attempt stops before its server deadline: room for a small clock skew, never a big slice of a short budget. */
export const stepDeadlineLeadMs = (budgetMs: number): number => Math.min(500, Math.floor(budgetMs / 20));

/** Why the step signal aborted when it was the budget, not Temporal's cancellation. */
export class StepBudgetSpent extends Error {
  constructor(readonly deadlineMs: number) {
    super(`step budget spent at ${new Date(deadlineMs).toISOString()}: this attempt stops acting`);
    this.name = 'StepBudgetSpent';
  }
}

interface StepSignal {
  /** stepDeadlineMs as read at the attempt's first use; null: Temporal's timers alone bound it. */
  deadlineMs: number | null;
  signal: AbortSignal;
  /** Aborted by the budget (not by Temporal's cancellation). */
  budget: AbortSignal;
}

const signals = new WeakMap<Context, StepSignal>();
/** When each attempt began, on this worker's clock (the interceptor notes it): its budget counts from there. */
const attemptStarts = new WeakMap<Context, number>();

function stepSignalOf(ctx: Context): StepSignal {
  const known = signals.get(ctx);
  if (known) return known;
  const budget = new AbortController();
  const deadline = stepDeadlineMs(ctx.info, attemptStarts.get(ctx) ?? Date.now());
  if (deadline !== null) {
    const timer = setTimeout(() => budget.abort(new StepBudgetSpent(deadline)), Math.max(0, deadline - Date.now()));
    timer.unref();
    ctx.cancellationSignal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  }
  const made = {
    deadlineMs: deadline,
    signal: AbortSignal.any([ctx.cancellationSignal, budget.signal]),
    budget: budget.signal,
  };
  signals.set(ctx, made);
  return made;
}

/**
 * The signal every host request and every pause of an activity honours: Temporal's cancellation, or the step's
 * budget running out (stepDeadlineMs), whichever comes first.
 */
export const stepSignal = (): AbortSignal => stepSignalOf(Context.current()).signal;

/** What is left of this attempt's step budget (ms, at least 0), or null when only Temporal's timers bound it. */
export function stepBudgetLeftMs(): number | null {
  const { deadlineMs } = stepSignalOf(Context.current());
  return deadlineMs === null ? null : Math.max(0, deadlineMs - Date.now());
}

/** Sleeps `ms` unless the step signal aborts first (then rejects with its reason). */
export function pause(ms: number): Promise<void> {
  const signal = stepSignal();
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The longest an attempt past its budget waits for Temporal's word before it fails by itself. */
const SPENT_WAIT_CAP_MS = 60_000;

/**
 * An attempt that stopped because its budget ran out reports no failure of its own: the step's outcome stays
 * Temporal's timeout, with the last heartbeat's `waitingFor` (workflows/failure-info.ts). It waits, without
 * heartbeating over those details, for the cancellation the SDK's core then delivers (its local heartbeat or
 * start-to-close timer fires) and rethrows its own error, which the server ignores by then; after
 * SPENT_WAIT_CAP_MS without one (the server's word lost) it rethrows at once.
 */
export const stepBudgetInterceptor: ActivityInterceptorsFactory = (ctx) => ({
  inbound: {
    async execute(input, next) {
      attemptStarts.set(ctx, Date.now());
      try {
        return await next(input);
      } catch (err) {
        const { budget } = stepSignalOf(ctx);
        if (!budget.aborted || ctx.cancellationSignal.aborted) throw err;
        let timer: NodeJS.Timeout | undefined;
        const cap = new Promise<void>((resolve) => (timer = setTimeout(resolve, SPENT_WAIT_CAP_MS)));
        await Promise.race([ctx.cancelled.catch(() => undefined), cap]);
        clearTimeout(timer);
        throw err;
      }
    },
  },
});
