import { CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import {
  StepBudgetSpent,
  stepBudgetInterceptor,
  stepBudgetLeftMs,
  stepDeadlineLeadMs,
  stepDeadlineMs,
  stepSignal,
} from './step-budget';
import { waitUntil } from './support';

describe('stepDeadlineMs', () => {
  const at = 1_000_000;
  /** The server's timestamps: the step first scheduled at `at`, this attempt scheduled `spentMs` later. */
  const info = (scheduleToCloseTimeoutMs: number, spentMs = 0) => ({
    scheduledTimestampMs: at,
    currentAttemptScheduledTimestampMs: at + spentMs,
    scheduleToCloseTimeoutMs,
  });

  it("is the attempt's start plus what its budget had left, less a lead", () => {
    expect(stepDeadlineMs(info(60_000), at)).toBe(at + 60_000 - 500);
    // A retry scheduled 59 s into a 60 s budget has 1 s left from its own start.
    expect(stepDeadlineMs(info(60_000, 59_000), at + 59_000)).toBe(at + 59_000 + 1_000 - 500);
  });

  it("never compares the worker's clock with the server's: a worker 30 s ahead or behind gets the same budget", () => {
    for (const skewMs of [-30_000, 0, 30_000]) {
      const startedMs = at + 10_000 + skewMs; // this attempt's start as the worker's clock reads it
      expect(stepDeadlineMs(info(60_000, 10_000), startedMs)! - startedMs).toBe(50_000 - 500);
    }
  });

  it('leads a short budget by a twentieth of it', () => {
    expect(stepDeadlineLeadMs(2_000)).toBe(100);
    expect(stepDeadlineMs(info(2_000), at)).toBe(at + 1_900);
  });

  it('is null without a schedule-to-close, and when the budget was spent before this attempt was scheduled', () => {
    expect(stepDeadlineMs(info(0), at)).toBeNull();
    expect(stepDeadlineMs(info(1_000, 1_000), at + 1_000)).toBeNull();
  });
});

describe('an attempt running into its step budget', () => {
  /** An attempt of a step whose budget (schedule-to-close, counted from now) is `budgetMs`. */
  const attempt = (budgetMs: number) =>
    new MockActivityEnvironment(
      { scheduledTimestampMs: Date.now(), scheduleToCloseTimeoutMs: budgetMs, startToCloseTimeoutMs: budgetMs },
      { interceptors: [stepBudgetInterceptor] },
    );

  it('stops looking at the host at the budget and ends only when Temporal times it out, with its own error', async () => {
    const env = attempt(600);
    const looks: number[] = [];
    let budgetSpentAt = 0;
    let onBudgetSpent!: () => void;
    const budgetSpent = new Promise<void>((resolve) => (onBudgetSpent = resolve));
    let settled = false;
    const running = env
      .run(async () => {
        stepSignal().addEventListener('abort', () => {
          budgetSpentAt = Date.now();
          onBudgetSpent();
        });
        return waitUntil(async () => {
          looks.push(Date.now());
          return { done: false as const, waitingFor: 'models not awake: a (asleep)' };
        }, 20);
      })
      .finally(() => (settled = true));
    const failure = running.catch((err: unknown) => err);

    await budgetSpent;
    const looksAtBudget = looks.length;
    // A macrotask later the attempt has neither looked again nor reported a failure of its own.
    await new Promise((resolve) => setImmediate(resolve));
    expect(looks.length).toBe(looksAtBudget);
    expect(looks.every((t) => t <= budgetSpentAt)).toBe(true);
    expect(settled).toBe(false);

    env.cancel('TIMED_OUT');
    const err = await failure;
    expect(err).toBeInstanceOf(StepBudgetSpent);
    expect(looks.length).toBe(looksAtBudget);
  });

  it("passes Temporal's own cancellation through at once, before the budget", async () => {
    const env = attempt(60_000);
    const running = env.run(() => waitUntil(async () => ({ done: false as const, waitingFor: 'x' }), 20));
    env.cancel('CANCELLED');
    await expect(running).rejects.toBeInstanceOf(CancelledFailure);
  });

  it("says what is left of the budget, less the lead, and nothing for an attempt Temporal's timers alone bound", async () => {
    const left = await attempt(60_000).run(async () => stepBudgetLeftMs());
    expect(left).toBeGreaterThan(60_000 - 500 - 1_000);
    expect(left).toBeLessThanOrEqual(60_000 - 500);
    expect(
      await new MockActivityEnvironment({ scheduleToCloseTimeoutMs: 0 }).run(async () => stepBudgetLeftMs()),
    ).toBeNull();
  });

  it('leaves an attempt that succeeds within its budget alone', async () => {
    const env = attempt(60_000);
    let n = 0;
    await expect(
      env.run(() => waitUntil(async () => (++n < 3 ? { done: false, waitingFor: 'x' } : { done: true, value: n }), 5)),
    ).resolves.toBe(3);
  });
});
