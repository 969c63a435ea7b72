import { ApplicationFailure, setCurrentDetails } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { FailureType } from '../schemas/failures';
import type { FleetPolicy } from '../schemas/policy';
import { controlActivities, controlLocalActivities, fingerprintTaking, stepActivities } from './activity-options';
import type { DemotionInput, DemotionResult } from './definitions';
import { planDemotion } from '../core/step-plan';
import { isHostUnreachable } from './failure-info';
import { createOperationRuntime, type OperationRuntime, StepFailure } from './operation-runtime';

/**
 * Puts a domain on standby (docs/architecture.md §4.4): drain (wait for no running requests, at most
 * `drainTimeoutMs`), sleep every model at its slot's level and prove it asleep, start training and prove
 * every run alive. Refuses the active domain here and again in the sleep activity's guard. With an
 * `operationId` it runs as an operation (row, steps, abort); without one it is a promotion's child.
 */
export async function demotionWorkflow(input: DemotionInput): Promise<DemotionResult> {
  const { fleetId, operationId, domainId } = input;
  const control = controlActivities();
  const op = createOperationRuntime({ fleetId, operationId: operationId ?? null, domainId, kind: 'demote' });

  const target = await op.begin(() => demotionTarget(input, control));
  if (target.state !== 'running') return { domainId, state: target.state, drained: null };
  const policy = input.policy ?? target.policy;
  op.usePolicy(policy);
  const steps = stepActivities(policy);
  await op.plan(planDemotion({ trainingSlotCount: target.trainingSlotCount }));

  let drained: boolean;
  try {
    drained = await standDown(op, steps, policy, fleetId, domainId);
  } catch (err) {
    if (!(err instanceof StepFailure)) throw err;
    // A promotion's child whose host is gone (routine after an auto-failover): the promotion records it; the
    // execution completes with state `unreachable`, no failure.
    if (!operationId && !err.isAbort && isHostUnreachable(err.info)) {
      op.setPhase('failed');
      // Completed, yet not a demotion: the Web UI's page says so beside the green status.
      setCurrentDetails(
        `**Not demoted**: the host did not answer at step ${err.step} (${err.info.message}); left as it was.`,
      );
      return {
        domainId,
        state: 'unreachable',
        drained: null,
        unreachable: { step: err.step, message: err.info.message },
      };
    }
    return op.finishFailed(err);
  }
  await op.finishSucceeded();
  return { domainId, state: 'succeeded', drained };
}

interface DemotionTarget {
  state: 'running' | 'succeeded' | 'failed' | 'cancelled';
  policy: FleetPolicy;
  trainingSlotCount: number;
}

/** Validates the target: never the active. An operation is started; a child only checks its domain. */
async function demotionTarget(input: DemotionInput, control: Activities): Promise<DemotionTarget> {
  const { fleetId, operationId, domainId } = input;
  if (operationId) {
    const begin = await controlLocalActivities().beginOperation({
      fleetId,
      operationId,
      kind: 'demote',
      targetDomainId: domainId,
    });
    const state = begin.state === 'pending' ? 'running' : begin.state;
    return { state, policy: begin.policy, trainingSlotCount: begin.target.trainingSlotCount };
  }
  const domain = await control.inspectDomain({ fleetId, domainId });
  if (domain.isActive) {
    throw ApplicationFailure.nonRetryable(
      `domain ${domain.slug} is the active domain; refusing to demote it`,
      FailureType.InvalidTarget,
    );
  }
  return { state: 'running', policy: domain.policy, trainingSlotCount: domain.trainingSlotCount };
}

/** Drain, sleep, train; returns whether the drain finished within its budget. */
async function standDown(
  op: OperationRuntime,
  steps: ReturnType<typeof stepActivities>,
  policy: FleetPolicy,
  fleetId: string,
  domainId: string,
): Promise<boolean> {
  const drain = await op.step('drain', (journal) =>
    steps.drainDomain({ domainId, timeoutMs: policy.drainTimeoutMs, journal }),
  );
  await op.step('sleepModels', (journal) =>
    steps.sleepModels({ fleetId, domainId, journal, fingerprint: fingerprintTaking(policy) }),
  );
  if (!op.isStepSkipped('startTraining')) {
    await op.step('startTraining', (journal) => steps.startTraining({ domainId, journal }));
  }
  return drain.drained;
}
