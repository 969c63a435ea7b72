import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { OperationRef } from '../activities/fleet-store';
import type { FleetObservation } from '../activities/fleet-monitor';
import { FailureType } from '../schemas/failures';
import type { FleetHealth } from '../schemas/health';
import type { FleetPolicy } from '../schemas/policy';
import {
  controlActivities,
  controlLocalActivities,
  lookActivities,
  restoreWaitMs,
  stepActivities,
} from './activity-options';
import {
  checkNowSignal,
  healthQuery,
  observedSignal,
  operationWorkflowId,
  pauseAutoFailoverSignal,
  releaseAtCommitSignal,
  resumeAutoFailoverSignal,
  type FleetMonitorInput,
} from './definitions';
import { summarizeHealth } from '../core/fleet-health';
import {
  coolingDownIds,
  decideMonitorAction,
  type MonitorDecision,
  operationToStart,
  PENDING_OPERATION_GRACE_MS,
  promotionCooldownMs,
} from '../core/monitor-decision';
import { ageMs, type FleetView } from '../core/fleet-view';
import { type HostRepair, hostRepairRetryMs, hostRepairsDue } from '../core/host-repair';
import {
  emptyReplacementState,
  hasReplacementState,
  planStandbyReplacements,
  type ReplacementAction,
  type ReplacementState,
} from '../core/standby-replacement';
import { startAbandonedChild } from './start-child';
import { operationStart, provisionStart, type StartSlugs, slugsOf, teardownStart } from './start-options';

/** Pause before the next round after a failed look or decision, so a fast-failing write does not spin. */
const DECISION_RETRY_MS = 5_000;

/**
 * Watches one fleet for as long as it exists (`haru/<fleetId>/monitor`). The fleet's watch shard polls every
 * supervisor and signals an observation (`observed`) when a decision is due, and once per checkpoint; the
 * monitor looks for itself (`lookAtFleet`) when it starts and when woken. On each observation it decides with
 * `decideMonitorAction`: mark a failed active failed, and promote the best standby when auto-failover is on,
 * not paused and nothing else is in flight. It also starts pending operations whose workflow is missing,
 * repairs hosts not at rest, and, with `replaceFailedStandby`, tears down and provisions again a managed
 * standby that stayed failed (`planStandbyReplacements`). Signals: `checkNow`, `pauseAutoFailover`,
 * `resumeAutoFailover` (written to the fleet's stored pause, which every round reads: a pause outlives the
 * run), `observed`; query: `health`. A look or decision whose activity fails (the store locked or down) is
 * logged and made again after a pause; the worker's `keepMonitors` starts a new run whenever this one ends.
 */
export async function fleetMonitorWorkflow(input: FleetMonitorInput): Promise<void> {
  const { fleetId } = input;
  let isPaused = input.isAutoFailoverPaused ?? false;
  let recentPromotions = input.recentPromotions ?? [];
  let replacements: ReplacementState = input.replacements ?? emptyReplacementState();
  let recentRepairs = input.recentRepairs ?? [];
  // The first round polls at once so `health` is fresh right after a (re)start.
  let isWakeRequested = true;
  let health: FleetHealth | null = null;
  let policy: FleetPolicy | null = null;
  const triedOperationIds: string[] = [];
  // Committed promotions this run asked to end (releaseAtCommit), so each is asked once.
  const releasedOperationIds: string[] = [];
  setHandler(checkNowSignal, () => void (isWakeRequested = true));
  // A signal's pause (true) or resume (false) not yet written to the fleet's stored pause.
  let unstoredPause: boolean | null = null;
  const onPauseSignal = (paused: boolean) =>
    void ((isPaused = paused), (unstoredPause = paused), (isWakeRequested = true));
  setHandler(pauseAutoFailoverSignal, () => onPauseSignal(true));
  setHandler(resumeAutoFailoverSignal, () => onPauseSignal(false));
  setHandler(healthQuery, () => health);
  // The newest observation signalled since the last decision. Observations are ordered by when they reach
  // this run, never by the clocks of the workers that made them (docs/architecture.md §9.2): the last to
  // arrive replaces any held, and a look of the monitor's own supersedes every one that arrived before it ended.
  const inbox: { signalled: FleetObservation | null } = { signalled: null };
  setHandler(observedSignal, (observed) => void (inbox.signalled = observed));

  /**
   * The next observation to decide on: a look of its own when woken (the start,
   * `checkNow`, a pause or resume), else the newest the shard signalled, waited for. Null when woken while
   * waiting (the loop stores a signalled pause first, then looks), or when the look failed: it looks again
   * after a pause. A look that finds the fleet gone throws (the monitor ends).
   */
  async function nextObservation(isImmediate: boolean): Promise<FleetObservation | null> {
    if (!isImmediate) {
      await condition(() => isWakeRequested || inbox.signalled !== null);
      if (isWakeRequested) return null;
      const observed = inbox.signalled;
      inbox.signalled = null;
      return observed;
    }
    try {
      const looked = await lookActivities(policy).lookAtFleet({ fleetId });
      inbox.signalled = null;
      return looked;
    } catch (err) {
      if (isCancellation(err) || isFleetGone(err)) throw err;
      log.error('look failed; looking again after a pause', { fleetId, error: String(err) });
      await sleep(DECISION_RETRY_MS);
      isWakeRequested = true;
      return null;
    }
  }

  while (!workflowInfo().continueAsNewSuggested) {
    // The stored pause is the one every monitor run obeys.
    if (unstoredPause !== null) {
      const paused = unstoredPause;
      try {
        await controlActivities().setAutoFailoverPause({ fleetId, paused, by: 'signal', reason: null });
        if (unstoredPause === paused) unstoredPause = null;
      } catch (err) {
        if (isCancellation(err)) throw err;
        log.error('pause not stored; trying again next round', { fleetId, paused, error: String(err) });
      }
    }
    const isImmediate = isWakeRequested;
    isWakeRequested = false;
    // Failed standbys are timed from what this watch sees, never from before it started looking.
    const watchStartedAt = new Date().toISOString();
    let observation: FleetObservation | null;
    try {
      observation = await nextObservation(isImmediate);
    } catch (err) {
      if (isFleetGone(err)) {
        log.info('fleet gone, monitor ends', { fleetId });
        return;
      }
      throw err;
    }
    if (!observation) continue;
    policy = observation.policy;
    // A signalled pause not yet stored wins over the store's until it is written.
    if (unstoredPause === null) {
      isPaused = observation.autoFailoverPause !== null;
    }
    // Domains' ages are judged on the clock of the worker that observed them (its sightings and its
    // `observedAt`); what this run remembers itself (cooldowns, repair holds, replacements) on workflow time.
    const now = new Date(observation.observedAt);
    const decidedAt = new Date();
    recentPromotions = recentPromotions.filter((r) => ageMs(r.at, decidedAt) < promotionCooldownMs(observation.policy));
    const options = {
      isAutoFailoverPaused: isPaused,
      coolingDownIds: coolingDownIds(recentPromotions, observation.policy, decidedAt),
      releasedOperationIds,
    };
    const decision = decideMonitorAction(observation.fleet, observation.policy, now, options);
    health = summarizeHealth(observation.fleet, observation.policy, now, options);
    // A round that started an operation leaves the hosts to it.
    let hasStartedOperation = false;
    try {
      if (decision.kind === 'failover' && decision.releaseOperationId) {
        releasedOperationIds.push(decision.releaseOperationId);
        await releaseAtCommit(fleetId, decision.releaseOperationId, decision.failure.message);
        isWakeRequested = true;
      }
      if (decision.kind === 'failover') {
        const promoted = await failOver(observation.fleet, decision, observation.policy);
        if (promoted) {
          hasStartedOperation = true;
          recentPromotions = [...recentPromotions, { domainId: promoted.targetDomainId, at: decidedAt.toISOString() }];
          triedOperationIds.push(promoted.id);
        }
      }
      const pending = operationToStart(observation.fleet, now, PENDING_OPERATION_GRACE_MS, triedOperationIds);
      if (pending) {
        triedOperationIds.push(pending.id);
        hasStartedOperation = true;
        log.warn('starting an operation whose workflow was missing', { fleetId, operationId: pending.id });
        try {
          await startOperation(
            { ...pending, fleetId, reason: 'started by the fleet monitor', requestedBy: 'monitor' },
            observation.policy,
            slugsOf(observation.fleet, pending.targetDomainId),
          );
        } catch (err) {
          // Not started: the next round tries it again.
          triedOperationIds.splice(triedOperationIds.indexOf(pending.id), 1);
          throw err;
        }
      }
    } catch (err) {
      // A decision's store write or start that ran out of its budget (the store locked or down) must not
      // end the watch: the next round decides again from what the store shows then.
      if (isCancellation(err)) throw err;
      log.error('decision not carried out; deciding again next round', {
        fleetId,
        decision: decision.kind,
        error: err instanceof Error ? err.message : String(err),
      });
      await sleep(DECISION_RETRY_MS);
      // A shard signals an unchanged decision again only after its hold-off: look at once instead.
      isWakeRequested = true;
    }
    if (!hasStartedOperation) {
      recentRepairs = recentRepairs.filter((r) => ageMs(r.at, decidedAt) < hostRepairRetryMs(observation.policy));
      const held = heldRepairIds(recentRepairs, observation.policy, decidedAt);
      for (const repair of hostRepairsDue(observation.fleet, held)) {
        recentRepairs = [...recentRepairs, { domainId: repair.domainId, at: decidedAt.toISOString() }];
        await repairHost(fleetId, repair, observation.policy);
      }
    }
    const planned = planStandbyReplacements(
      observation.fleet,
      observation.policy.replaceFailedStandby,
      decidedAt,
      watchStartedAt,
      replacements,
    );
    replacements = planned.state;
    for (const action of planned.actions) {
      try {
        await startReplacementStep(observation.fleet, action, () => void (isWakeRequested = true));
      } catch (err) {
        if (isCancellation(err)) throw err;
        // A replacement must never end the watch (the domain was removed meanwhile, the store is down):
        // it stays in flight and is started again after a grace without movement.
        log.error('replacement step not started', {
          fleetId,
          domainId: action.domainId,
          step: action.kind,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
  }
  await condition(allHandlersFinished);
  await continueAsNew<typeof fleetMonitorWorkflow>({
    fleetId,
    isAutoFailoverPaused: isPaused,
    recentPromotions,
    ...(recentRepairs.length > 0 ? { recentRepairs } : {}),
    ...(hasReplacementState(replacements) ? { replacements } : {}),
  });
}

/** The domains repaired within the retry interval before `now`: left alone until it has passed. */
const heldRepairIds = (recent: readonly { domainId: string; at: string }[], policy: FleetPolicy, now: Date) =>
  recent.filter((r) => ageMs(r.at, now) < hostRepairRetryMs(policy)).map((r) => r.domainId);

/**
 * Carries out one host repair (core/host-repair.ts); the activity records what it did as an event. A repair
 * that fails or leaves something undone never ends the watch: it is tried again after the retry interval.
 */
async function repairHost(fleetId: string, repair: HostRepair, policy: FleetPolicy): Promise<void> {
  const steps = stepActivities(policy);
  log.warn('repairing a host', { fleetId, domainId: repair.domainId, repair: repair.kind, problem: repair.problem });
  try {
    const result =
      repair.kind === 'restoreStandby'
        ? await steps.restoreStandby({
            fleetId,
            domainId: repair.domainId,
            why: repair.problem,
            waitMs: restoreWaitMs(policy),
          })
        : await steps.stopActiveTraining({
            fleetId,
            domainId: repair.domainId,
            why: repair.problem,
            graceMs: policy.trainingStopGraceMs,
            waitMs: restoreWaitMs(policy),
          });
    if (result.problems.length > 0) {
      log.warn('host repair left problems; trying again later', {
        fleetId,
        domainId: repair.domainId,
        problems: result.problems,
      });
    }
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.error('host repair failed; trying again later', {
      fleetId,
      domainId: repair.domainId,
      repair: repair.kind,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

const isFleetGone = (err: unknown): boolean =>
  err instanceof ActivityFailure &&
  err.cause instanceof ApplicationFailure &&
  err.cause.type === FailureType.InvalidTarget;

/**
 * Asks a committed promotion that still demotes the old active to end now (it cancels the demotion, waits
 * for it to stop and ends its operation), so the next round can fail over. A promotion whose workflow is
 * gone is left to the worker's orphan rule.
 */
async function releaseAtCommit(fleetId: string, operationId: string, why: string): Promise<void> {
  log.warn('the fleet needs its next failover: ending a committed promotion at its commit', { fleetId, operationId });
  try {
    await getExternalWorkflowHandle(operationWorkflowId(fleetId, operationId)).signal(releaseAtCommitSignal, {
      reason: `the next failover needs the fleet: ${why}`,
    });
  } catch (err) {
    if (isCancellation(err)) throw err;
    log.warn('committed promotion not reached', { fleetId, operationId, error: String(err) });
  }
}

/** Acts on a failover decision; returns the promotion it started, if any. */
async function failOver(
  fleet: FleetView,
  decision: Extract<MonitorDecision, { kind: 'failover' }>,
  policy: FleetPolicy,
): Promise<OperationRef | null> {
  const fleetId = fleet.id;
  const control = controlActivities();
  const failedActive =
    decision.shouldMarkActiveFailed && decision.activeDomainId
      ? { domainId: decision.activeDomainId, reason: decision.failure.message }
      : undefined;
  if (!decision.promoteDomainId) {
    if (failedActive) await control.markDomainFailed({ fleetId, ...failedActive });
    log.warn('active failed, no promotion', {
      fleetId,
      reason: decision.failure.reason,
      blockedBy: decision.blockedBy,
    });
    return null;
  }
  // The request marks the failed active first, and runs as a local activity inside this workflow task: the
  // promotion starts from the same task, without a round trip through the server between the two.
  const request = await controlLocalActivities().requestPromotion({
    fleetId,
    targetDomainId: decision.promoteDomainId,
    reason: `auto-failover: ${decision.failure.message}`,
    failedActive,
  });
  if (request.outcome === 'conflict') return null;
  log.info('auto-failover promotion requested', {
    fleetId,
    operationId: request.operation.id,
    targetDomainId: decision.promoteDomainId,
  });
  await startOperation(request.operation, policy, slugsOf(fleet, decision.promoteDomainId));
  return request.operation;
}

/** Starts an operation's workflow as an abandoned child under its business id; already started is fine. */
async function startOperation(op: OperationRef, policy: FleetPolicy, slugs: StartSlugs): Promise<void> {
  try {
    await startAbandonedChild(operationStart(op, policy, slugs));
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * Starts one step of replacing a failed standby as an abandoned child under the domain's own workflow id
 * (`haru/<domainId>/teardown`, `haru/<domainId>/provision`): one already running (an operator's, or an
 * earlier look's) is joined, not duplicated. Records a `domain.replacement` event first. `onDone` runs
 * when the child ends, so the next step is planned at once rather than at the next checkpoint.
 */
async function startReplacementStep(fleet: FleetView, action: ReplacementAction, onDone: () => void): Promise<void> {
  const fleetId = fleet.id;
  const reason = action.kind === 'teardown' ? action.reason : `standby ${action.slug} torn down: provisioning it again`;
  await controlActivities().recordStandbyReplacement({ domainId: action.domainId, step: action.kind, reason });
  const request = { fleetId, reason, requestedBy: 'monitor', slugs: slugsOf(fleet, action.domainId) };
  try {
    const child =
      action.kind === 'teardown'
        ? await startAbandonedChild(
            teardownStart({ domainId: action.domainId, mode: 'down', onlyIfFailed: true }, request),
          )
        : await startAbandonedChild(provisionStart({ domainId: action.domainId }, request));
    void child.result().then(onDone, onDone);
    log.warn('replacing a failed standby', { fleetId, domainId: action.domainId, step: action.kind });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    log.info('replacement step already running: joined', { fleetId, domainId: action.domainId, step: action.kind });
  }
}
