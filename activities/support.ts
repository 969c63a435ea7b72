import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Domain, InferenceSlot, TrainingSlot } from '../schemas/entities';
import { FailureType } from '../schemas/failures';
import type { ActivityDeps } from './deps';
import { pause, stepSignal } from './step-budget';

/** A domain with its slots split by kind, as the supervisor activities need it. */
export interface DomainTarget {
  domain: Domain;
  inference: InferenceSlot[];
  training: TrainingSlot[];
}

/** Loads a domain and its slots. Throws non-retryable InvalidTarget when the domain does not exist. */
export async function loadTarget(deps: ActivityDeps, domainId: string): Promise<DomainTarget> {
  // Asked at once: every step begins with this read, on the failover's path.
  const [domain, slots] = await Promise.all([
    deps.store.domains.get(domainId),
    deps.store.slots.listByDomain(domainId),
  ]);
  if (!domain) {
    throw ApplicationFailure.nonRetryable(`domain ${domainId} does not exist`, FailureType.InvalidTarget, { domainId });
  }
  return {
    domain,
    inference: slots.filter((s): s is InferenceSlot => s.kind === 'inference'),
    training: slots.filter((s): s is TrainingSlot => s.kind === 'training'),
  };
}

/** Names of every model bound in the given inference slots. */
export const modelNamesOf = (slots: readonly InferenceSlot[]): string[] =>
  slots.flatMap((s) => s.models.map((m) => m.name));

/** One look at the world while waiting: done with a value, or not yet with what is still missing. */
export type WaitCheck<T> =
  { done: true; value: T } | { done: false; waitingFor: string; details?: Record<string, unknown> };

/** The first re-check of `waitUntil`; the pause then doubles up to the interval. */
export const FIRST_RECHECK_MS = 5;

/**
 * Re-runs `check` until it reports done, heartbeating `{ waitingFor, ...details }` after every look so
 * the workflow's timeout failure says what never happened. The pause starts at FIRST_RECHECK_MS and
 * doubles up to `intervalMs`: most effects land milliseconds after the request (a trainer exits on
 * SIGTERM), and a fixed interval would add up to `intervalMs` to every step (docs/performance.md).
 * Ends only by success, by an error from `check`, or by the step signal: an abort (the activity's
 * CancelledFailure) or the step budget running out (activities/step-budget.ts).
 */
export async function waitUntil<T>(check: () => Promise<WaitCheck<T>>, intervalMs: number): Promise<T> {
  const ctx = Context.current();
  for (let pauseMs = Math.min(FIRST_RECHECK_MS, intervalMs); ; pauseMs = Math.min(pauseMs * 2, intervalMs)) {
    const result = await check();
    if (result.done) return result.value;
    ctx.heartbeat({ waitingFor: result.waitingFor, ...result.details });
    await pause(pauseMs);
  }
}

/** The current activity attempt (1 for the first), reported back so progress can show retries. */
export const currentAttempt = (): number => Context.current().info.attempt;

/** The signal every host request honours: the activity's cancellation, or its step budget running out. */
export const cancellation = (): AbortSignal => stepSignal();

/** How often `heartbeatWhile` heartbeats (the worker throttles what reaches the server anyway). */
const BUSY_HEARTBEAT_MS = 1_000;

/**
 * Awaits `work` (one long supervisor call, such as a wake that reloads weights) while heartbeating
 * `{ waitingFor, ...details }` every second, so a healthy call is never mistaken for a dead worker and a
 * cancellation still reaches the activity (its signal aborts the call). `details` keeps what a retry needs (the
 * heartbeat replaces the last one's).
 */
export async function heartbeatWhile<T>(
  waitingFor: string,
  work: Promise<T>,
  details: Record<string, unknown> = {},
): Promise<T> {
  const ctx = Context.current();
  ctx.heartbeat({ waitingFor, ...details });
  const timer = setInterval(() => ctx.heartbeat({ waitingFor, ...details }), BUSY_HEARTBEAT_MS);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

/**
 * Request options for a supervisor action: the activity's cancellation, and a timeout as long as the
 * step's own budget (a level-2 wake may take minutes; the step budget is what bounds it).
 */
export function actionOptions(): { signal: AbortSignal; timeoutMs: number } {
  const ctx = Context.current();
  return { signal: stepSignal(), timeoutMs: Math.max(10_000, ctx.info.startToCloseTimeoutMs || 0) };
}
