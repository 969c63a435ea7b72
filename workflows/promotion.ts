import { ApplicationFailure, condition, getExternalWorkflowHandle, log, setHandler } from '@temporalio/workflow';
import type { BeginOperationResult } from '../activities/fleet-store';
import { FailureType } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import { controlLocalActivities, probeRequestTimeoutMs, restoreWaitMs, stepActivities } from './activity-options';
import type { demotionWorkflow } from './demotion';
import { releaseAtCommitSignal, type PromotionInput, type PromotionResult } from './definitions';
import { afterFailedCommit } from '../core/commit-retry';
import { startedSteps } from '../core/operation-progress';
import { compensationFor, planPromotion, type PromotionStep } from '../core/step-plan';
import { isHostUnreachable } from './failure-info';
import { createOperationRuntime, type OperationRuntime, StepFailure } from './operation-runtime';
import { startAbandonedChild } from './start-child';
import { demotionChildStart } from './start-options';

type Steps = ReturnType<typeof stepActivities>;

/**
 * Promotes a standby domain to active (docs/architecture.md §4.3): stop training, verify VRAM released, wake every
 * model, probe every model, move the routing pointer with one CAS, then demote the old active as a
 * best-effort child. Any failure or abort before the commit puts the target back on standby, marks the
 * operation failed or cancelled with `{ step, code, message }` and fails this execution; routing stays. A
 * commit the state store did not answer is made again once it does, within the policy's outage budget.
 */
export async function promotionWorkflow(input: PromotionInput): Promise<PromotionResult> {
  const { fleetId, operationId, targetDomainId } = input;
  const op = createOperationRuntime({ fleetId, operationId, domainId: targetDomainId, kind: 'promote' });
  let releaseReason: string | null = null;
  setHandler(releaseAtCommitSignal, (request) => void (releaseReason ??= request.reason));

  const begin = await op.begin(() => controlLocalActivities().beginOperation({ ...input, kind: 'promote' }));
  if (begin.state !== 'running') {
    // A repeat start of an operation that already ended: nothing to do.
    return {
      operationId,
      state: begin.state as PromotionResult['state'],
      routeRevision: begin.routeRevision,
      demotion: 'skipped',
    };
  }
  const policy = input.policy ?? begin.policy;
  op.usePolicy(policy);
  const steps = stepActivities(policy);
  await op.plan(
    planPromotion({
      targetDomainId,
      fromDomainId: begin.fromDomainId,
      trainingSlotCount: begin.target.trainingSlotCount,
      isRoutingCommitted: begin.isRoutingCommitted,
    }),
  );

  let commit: { routeRevision: number };
  try {
    await prepareTarget(op, steps, policy, targetDomainId);
    op.closeAbortWindow();
    commit = await commitRouting(input, op, steps, policy, begin.fromDomainId);
  } catch (err) {
    if (!(err instanceof StepFailure)) throw err;
    return await abandon(input, op, steps, policy, err);
  }
  log.info('routing committed', {
    fleetId,
    operationId,
    fromDomainId: begin.fromDomainId,
    toDomainId: targetDomainId,
    revision: commit.routeRevision,
  });

  const demotion = op.isStepSkipped('demoteOldActive')
    ? { outcome: 'skipped' as const, error: undefined }
    : await demoteOldActive(
        op,
        { fleetId, operationId, oldActiveId: begin.fromDomainId!, policy, slugs: slugsOfBegin(begin) },
        () => releaseReason,
      );
  await op.finishSucceeded(demotion.error);
  return { operationId, state: 'succeeded', routeRevision: commit.routeRevision, demotion: demotion.outcome };
}

/**
 * The commit that happened although its step failed, or null when routing did not move. A commit whose
 * answer was lost (the worker died after the statement, or the step budget ran out on a slow store) has
 * moved the pointer: the promotion then goes on to the demotion instead of failing with routing moved.
 */
async function committedAnyway(
  input: PromotionInput,
  op: OperationRuntime,
  failure: StepFailure,
): Promise<{ routeRevision: number } | null> {
  const outcome = await op.bookkeep('commit re-read', (store) =>
    store.readRoutingOutcome({ fleetId: input.fleetId, operationId: input.operationId }),
  );
  if (!outcome.isRoutingCommitted || outcome.routeRevision === null) return null;
  log.warn('commit step failed but routing had moved: going on', {
    fleetId: input.fleetId,
    operationId: input.operationId,
    revision: outcome.routeRevision,
    error: failure.message,
  });
  await op.recovered(
    'commitRouting',
    `routing committed at revision ${outcome.routeRevision} (the step's own answer was lost: ${failure.info.message})`,
  );
  return { routeRevision: outcome.routeRevision };
}

/**
 * Step 5: move routing with the CAS. A failed commit is checked against the operation row (its answer may
 * have been lost). One that never got an answer (its budget spent on an unreachable store) does not undo the
 * woken, probed target: once the store answers, within the policy's `commitOutageBudgetMs` of the first
 * attempt, the target is probed again and the commit made again (`core/commit-retry.ts`). Throws the
 * StepFailure to compensate for: a lost CAS, a failed probe, an outage past its budget.
 */
async function commitRouting(
  input: PromotionInput,
  op: OperationRuntime,
  steps: Steps,
  policy: FleetPolicy,
  expectedActiveDomainId: string | null,
): Promise<{ routeRevision: number }> {
  const { fleetId, operationId, targetDomainId } = input;
  const firstAttemptAt = Date.now();
  for (let round = 1; ; round++) {
    try {
      // Every round after the first proves again that the target serves: it waited out the outage unrouted.
      if (round > 1) await probeTarget(op, steps, policy, targetDomainId);
      return await op.step('commitRouting', (journal) =>
        steps.commitRouting({ fleetId, operationId, expectedActiveDomainId, targetDomainId, journal }),
      );
    } catch (err) {
      if (!(err instanceof StepFailure)) throw err;
      // The failure's record and this re-read both wait for the store: what follows is decided once it answers.
      const committed = err.step === 'commitRouting' ? await committedAnyway(input, op, err) : null;
      if (committed) return committed;
      const next = afterFailedCommit({ step: err.step, ...err.info, waitedMs: Date.now() - firstAttemptAt }, policy);
      if (next.action === 'compensate') {
        if (next.reason === null) throw err;
        throw new StepFailure(err.step, { ...err.info, message: `${err.info.message}; ${next.reason}` }, false);
      }
      log.warn('routing not committed: the state store did not answer; probing the target again to commit again', {
        fleetId,
        operationId,
        round,
        step: err.step,
        error: err.info.message,
      });
    }
  }
}

/** Steps 1-4: make the target able to serve, proving each effect before the next. */
async function prepareTarget(op: OperationRuntime, steps: Steps, policy: FleetPolicy, domainId: string): Promise<void> {
  let stopped: { trainerPids: number[]; trainerEndedAt?: string | null } = { trainerPids: [] };
  if (!op.isStepSkipped('stopTraining')) {
    stopped = await op.step('stopTraining', (journal) =>
      steps.stopTraining({ domainId, graceMs: policy.trainingStopGraceMs, journal }),
    );
  }
  if (!op.isStepSkipped('verifyGpuReleased')) {
    const { trainerPids, trainerEndedAt } = stopped;
    await op.step('verifyGpuReleased', (journal) =>
      steps.verifyGpuReleased({
        domainId,
        trainerPids,
        trainerEndedAt,
        maxUsedRatio: policy.maxUsedRatioForWake,
        journal,
      }),
    );
  }
  if (!op.isStepSkipped('wakeModels')) {
    await op.step('wakeModels', (journal) => steps.wakeModels({ domainId, journal }));
  }
  if (!op.isStepSkipped('probeModels')) await probeTarget(op, steps, policy, domainId);
}

/** Step 4: every model of the target answers a synthetic completion, as the proxy will reach it. */
async function probeTarget(op: OperationRuntime, steps: Steps, policy: FleetPolicy, domainId: string): Promise<void> {
  await op.step('probeModels', (journal) =>
    steps.probeModels({
      domainId,
      prompt: policy.probe.prompt,
      maxTokens: policy.probe.maxTokens,
      timeoutMs: probeRequestTimeoutMs(policy),
      fingerprint: policy.probe.fingerprint,
      journal,
    }),
  );
}

/**
 * The promotion stopped before routing moved: put the target back on standby (models asleep, training
 * running) once stopping its training began, end the operation as failed or cancelled, and fail this
 * execution with the reason. Compensation puts the target back from what its supervisor shows, per GPU and
 * per model (`restoreStandby`), so one dead model does not stop it on every GPU, and it runs even when the
 * row was closed meanwhile.
 */
async function abandon(
  input: PromotionInput,
  op: OperationRuntime,
  steps: Steps,
  policy: FleetPolicy,
  failure: StepFailure,
): Promise<never> {
  const { fleetId, operationId, targetDomainId: domainId } = input;
  op.closeAbortWindow();
  const actions = compensationFor(startedSteps(op.progress) as PromotionStep[]);
  if (actions.length > 0) {
    op.setPhase('compensating');
    await op.compensate(
      'compensate',
      () =>
        steps.restoreStandby({
          fleetId,
          domainId,
          why: `promotion ${operationId} compensated`,
          waitMs: restoreWaitMs(policy),
        }),
      (r) =>
        r.problems.length === 0
          ? `target back on standby (${describeRestore(r)})`
          : `target partly back on standby (${describeRestore(r)}); not restored: ${r.problems.join('; ')}`,
    );
  }
  return op.finishFailed(failure);
}

const slugsOfBegin = (begin: BeginOperationResult) => ({
  fleet: begin.fleetSlug,
  domain: begin.fromDomainSlug ?? undefined,
});

const describeRestore = (r: { sleptGpus: number[]; trainingStartedGpus: number[] }): string =>
  [
    r.sleptGpus.length ? `slept GPU ${r.sleptGpus.join(', ')}` : 'no GPU to sleep',
    r.trainingStartedGpus.length
      ? `training started on GPU ${r.trainingStartedGpus.join(', ')}`
      : 'no training to start',
  ].join(', ');

/** The failure type of a demotion the next failover cut short (recorded on the step; the promotion succeeds). */
const DEMOTION_CUT_SHORT = 'DemotionCutShort';

/**
 * Step 6: drain, sleep and retrain the old active as a child that outlives this workflow. Best effort: a
 * child that found the host unreachable completes, and this step records it failed with that error; a
 * demotion the next failover needs out of the way (`releaseReason`) is cancelled and waited for.
 */
async function demoteOldActive(
  op: OperationRuntime,
  child: Parameters<typeof demotionChildStart>[0] & { policy: FleetPolicy },
  releaseReason: () => string | null,
): Promise<{
  outcome: 'succeeded' | 'failed' | 'unreachable';
  /** The step's failure, kept on the operation row. */
  error?: { step: string; code: string; message: string };
}> {
  const { fleetId, operationId, oldActiveId } = child;
  try {
    await op.run(
      'demoteOldActive',
      async () => {
        const handle = await startAbandonedChild<typeof demotionWorkflow>(demotionChildStart(child));
        const result = handle.result();
        const released = await Promise.race([
          result.then(() => false),
          condition(() => releaseReason() !== null).then(() => true),
        ]);
        if (released) {
          // The fleet needs its next failover: the demotion is cancelled and waited for, so the next promotion
          // never meets it still touching the old active's host.
          log.warn('demotion of the old active cut short', { fleetId, operationId, reason: releaseReason() });
          await getExternalWorkflowHandle(handle.workflowId).cancel();
          await result.catch(() => undefined);
          throw ApplicationFailure.nonRetryable(`demotion cut short: ${releaseReason()}`, DEMOTION_CUT_SHORT);
        }
        const done = await result;
        if (done.state === 'unreachable') {
          const at = done.unreachable ? `${done.unreachable.step}: ${done.unreachable.message}` : 'no answer';
          throw ApplicationFailure.nonRetryable(
            `old active unreachable, left as it was (${at})`,
            FailureType.SupervisorUnreachable,
          );
        }
        return done;
      },
      (r) => `old active on standby${r.drained === false ? ' (drain budget spent)' : ''}`,
    );
    return { outcome: 'succeeded' };
  } catch (err) {
    if (!(err instanceof StepFailure)) throw err;
    log.warn('demotion of the old active failed', { fleetId, operationId, domainId: oldActiveId, error: err.message });
    return {
      outcome: isHostUnreachable(err.info) ? 'unreachable' : 'failed',
      error: { step: err.step, code: err.info.code, message: err.info.message },
    };
  }
}
