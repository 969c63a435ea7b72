/**
 * The promotion and demotion runbooks against the real dev server with stub activities: step order,
 * compensation, failure reporting, abort. The end-to-end tests with simulated hosts live beside this file.
 */
import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import { FailureType } from '../../schemas/failures';
import { abortSignal, operationWorkflowId, progressQuery } from '../../workflows/definitions';
import { demotionWorkflow, promotionWorkflow } from '../../workflows';
import { workflowBundle } from './support/bundle';
import { fastPolicy, STUB, stubActivities } from './support/stub-activities';
import { eventually, uniqueTaskQueue, useTestServer } from './support/temporal';

const server = useTestServer();

const input = (policy = fastPolicy()) => ({
  fleetId: STUB.fleet,
  operationId: crypto.randomUUID(),
  targetDomainId: STUB.standby,
  reason: 'test',
  policy,
});

/** Runs `fn` with a worker over the stub activities on a fresh task queue. */
async function withWorker<T>(activities: Activities, fn: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = uniqueTaskQueue('runbook');
  const worker = await Worker.create({
    connection: server.connection,
    taskQueue,
    workflowBundle: workflowBundle(),
    activities,
  });
  return worker.runUntil(fn(taskQueue));
}

/** Waits for a workflow's failure and returns its ApplicationFailure cause. */
async function failureOf(result: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await result.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const cause = (err as WorkflowFailedError).cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  return cause as ApplicationFailure;
}

/** A stub lifecycle step that heartbeats what it waits for until it is cancelled. */
const waitsForever = (waitingFor: string) => async () => {
  for (;;) {
    Context.current().heartbeat({ waitingFor });
    await Context.current().sleep(50);
  }
};

/** Starts a promotion of `args` on a worker over `activities` and runs `fn` with its handle while the worker runs. */
async function withPromotion<T>(
  activities: Activities,
  args: ReturnType<typeof input>,
  fn: (handle: WorkflowHandleWithFirstExecutionRunId<typeof promotionWorkflow>) => Promise<T>,
): Promise<T> {
  return withWorker(activities, async (taskQueue) =>
    fn(
      await server.client.workflow.start(promotionWorkflow, {
        taskQueue,
        workflowId: operationWorkflowId(args.fleetId, args.operationId),
        args: [args],
      }),
    ),
  );
}

/** Runs one promotion with `activities` to its end; its input, result and final progress. */
async function promoteToEnd(activities: Activities) {
  const args = input();
  const ended = await withPromotion(activities, args, async (handle) => ({
    result: await handle.result(),
    progress: await handle.query(progressQuery),
  }));
  return { args, ...ended };
}

/** Runs one promotion of `args` with `activities` to its failure; the ApplicationFailure it failed with. */
const promotionFailure = (activities: Activities, args = input()): Promise<ApplicationFailure> =>
  withPromotion(activities, args, (handle) => failureOf(handle.result()));

describe('promotionWorkflow runbook', () => {
  it('runs the six steps in order, proving each before the next, and reports every timing', async () => {
    const { activities, calls, finished } = stubActivities();
    const { args, result, progress } = await promoteToEnd(activities);
    expect(result).toEqual({
      operationId: args.operationId,
      state: 'succeeded',
      routeRevision: 2,
      demotion: 'succeeded',
    });
    expect(calls.filter((c) => !c.startsWith('step:'))).toEqual([
      'beginOperation',
      'stopTraining',
      'verifyGpuReleased',
      'wakeModels',
      'probeModels',
      'commitRouting',
      'inspectDomain',
      'drainDomain',
      'sleepModels',
      'startTraining',
      'finishOperation',
    ]);
    expect(finished).toEqual([{ outcome: 'succeeded' }]);
    expect(progress.phase).toBe('succeeded');
    expect(progress.steps.map((s) => [s.step, s.status, s.attempts])).toEqual([
      ['stopTraining', 'succeeded', 1],
      ['verifyGpuReleased', 'succeeded', 1],
      ['wakeModels', 'succeeded', 1],
      ['probeModels', 'succeeded', 1],
      ['commitRouting', 'succeeded', 1],
      ['demoteOldActive', 'succeeded', 1],
    ]);
    for (const s of progress.steps) expect(Date.parse(s.finishedAt!)).toBeGreaterThanOrEqual(Date.parse(s.startedAt!));
    expect(calls).toContain('step:commitRouting:succeeded');
  });

  it.each([
    ['stopTraining', ['restoreStandby']],
    ['verifyGpuReleased', ['restoreStandby']],
    ['wakeModels', ['restoreStandby']],
    ['probeModels', ['restoreStandby']],
  ] as const)(
    'a non-retryable failure at %s compensates from the host state (%j), never commits, and fails naming the step',
    async (step, undo) => {
      const { activities, calls, finished } = stubActivities({
        [step]: async () => {
          throw ApplicationFailure.nonRetryable(`${step} broke`, FailureType.ProbeFailed);
        },
      });
      const failure = await promotionFailure(activities);
      expect(failure).toMatchObject({ type: 'PromotionFailed', message: `promotion failed at ${step}: ${step} broke` });
      expect(calls).not.toContain('commitRouting');
      const after = calls.slice(calls.indexOf(step) + 1).filter((c) => !c.startsWith('step:'));
      expect(after).toEqual([...undo, 'finishOperation']);
      expect(finished).toEqual([
        { outcome: 'failed', error: { step, code: FailureType.ProbeFailed, message: `${step} broke` } },
      ]);
    },
  );

  it('a compensation whose started record meets a row closed by someone else still puts the target back', async () => {
    const { activities, calls, finished } = stubActivities({
      probeModels: async () => {
        throw ApplicationFailure.nonRetryable('probe broke', FailureType.ProbeFailed);
      },
      recordStep: async (r) => {
        if (r.step === 'compensate' && r.status === 'started') {
          throw ApplicationFailure.nonRetryable('operation is no longer in flight', FailureType.OperationClosed);
        }
      },
    });
    const failure = await promotionFailure(activities);
    expect(failure.message).toBe('promotion failed at probeModels: probe broke');
    expect(calls.slice(calls.indexOf('probeModels') + 1).filter((c) => !c.startsWith('step:'))).toEqual([
      'restoreStandby',
      'finishOperation',
    ]);
    expect(finished[0]).toMatchObject({ outcome: 'failed', error: { step: 'probeModels' } });
  });

  it('a compensation that leaves part of the target unrestored records what is left and still ends the operation', async () => {
    const { activities, calls, finished } = stubActivities({
      probeModels: async () => {
        throw ApplicationFailure.nonRetryable('probe broke', FailureType.ProbeFailed);
      },
      restoreStandby: async () => ({
        attempt: 1,
        sleptGpus: [0],
        trainingStartedGpus: [0],
        problems: ['training not restarted on GPU 1: b does not answer'],
      }),
    });
    await promotionFailure(activities);
    expect(calls).toContain('step:compensate:succeeded');
    expect(finished[0]).toMatchObject({ outcome: 'failed', error: { step: 'probeModels' } });
  });

  it('fails a step that outlives its budget, naming what it was waiting for', async () => {
    const { activities, finished } = stubActivities({ wakeModels: waitsForever('models not awake: llama (asleep)') });
    const failure = await promotionFailure(activities, input(fastPolicy({ wakeTimeoutMs: 1_500 })));
    expect(failure.message).toMatch(
      /^promotion failed at wakeModels: step budget spent \(.+\): models not awake: llama \(asleep\)$/,
    );
    expect(finished[0]).toMatchObject({ outcome: 'failed', error: { step: 'wakeModels', code: 'Timeout' } });
  });

  it('names the last error when every attempt of a step failed transiently until its budget ran out', async () => {
    const { activities, finished } = stubActivities({
      wakeModels: async () => {
        throw ApplicationFailure.retryable('supervisor refused wake of GPU 0: llama: still asleep', FailureType.NotYet);
      },
    });
    const failure = await promotionFailure(activities, input(fastPolicy({ wakeTimeoutMs: 1_500 })));
    expect(failure.message).toMatch(
      /^promotion failed at wakeModels: (step budget spent \(.+\): last error: )?supervisor refused wake of GPU 0: llama: still asleep$/,
    );
    // The budget ends either mid-attempt (a timeout carrying the last error) or before a retry (the error itself).
    expect(finished[0]).toMatchObject({ outcome: 'failed', error: { step: 'wakeModels' } });
    expect((finished[0]!.error as { code: string }).code).toMatch(/^(Timeout|NotYet)$/);
  });

  it('retries a transient supervisor error inside the step budget', async () => {
    let attempts = 0;
    const { activities } = stubActivities({
      wakeModels: async () => {
        attempts += 1;
        if (attempts < 3) throw ApplicationFailure.retryable('HTTP 503', FailureType.SupervisorUnreachable);
        return { attempt: Context.current().info.attempt, models: ['llama'] };
      },
    });
    const { progress } = await promoteToEnd(activities);
    expect(progress.steps.find((s) => s.step === 'wakeModels')).toMatchObject({ status: 'succeeded', attempts: 3 });
  });

  it('an abort before commit cancels the waiting step, compensates and ends cancelled', async () => {
    const { activities, calls, finished } = stubActivities({ wakeModels: waitsForever('models not awake') });
    const failure = await withPromotion(activities, input(fastPolicy({ wakeTimeoutMs: 60_000 })), async (handle) => {
      await eventually('wakeModels to run', () => calls.includes('wakeModels'));
      await handle.signal(abortSignal, { reason: 'operator changed their mind' });
      const f = await failureOf(handle.result());
      const progress = await handle.query(progressQuery);
      expect(progress).toMatchObject({ phase: 'cancelled', abortRequested: true });
      return f;
    });
    expect(failure).toMatchObject({
      type: 'PromotionAborted',
      message: 'promotion aborted at wakeModels: operator changed their mind',
    });
    expect(calls).not.toContain('commitRouting');
    expect(calls.slice(calls.indexOf('wakeModels') + 1).filter((c) => !c.startsWith('step:'))).toEqual([
      'restoreStandby',
      'finishOperation',
    ]);
    expect(finished).toEqual([
      { outcome: 'cancelled', error: { step: 'wakeModels', code: 'Aborted', message: 'operator changed their mind' } },
    ]);
  });

  it('a lost CAS fails the promotion and puts the target back on standby', async () => {
    const { activities, calls, finished } = stubActivities({
      commitRouting: async () => {
        throw ApplicationFailure.nonRetryable('routing pointer moved', FailureType.RouteConflict);
      },
    });
    const failure = await promotionFailure(activities);
    expect(failure.message).toBe('promotion failed at commitRouting: routing pointer moved');
    expect(calls.slice(calls.indexOf('commitRouting') + 1).filter((c) => !c.startsWith('step:'))).toEqual([
      'readRoutingOutcome',
      'restoreStandby',
      'finishOperation',
    ]);
    expect(finished[0]).toMatchObject({
      outcome: 'failed',
      error: { step: 'commitRouting', code: FailureType.RouteConflict },
    });
  });

  it('a commit step that failed after routing moved (its answer lost) goes on to the demotion instead of compensating', async () => {
    const { activities, calls, finished } = stubActivities({
      commitRouting: async () => {
        throw ApplicationFailure.nonRetryable('commit answer lost', 'Timeout');
      },
      readRoutingOutcome: async () => ({ isRoutingCommitted: true, routeRevision: 7 }),
    });
    const { args, result, progress } = await promoteToEnd(activities);
    expect(result).toEqual({
      operationId: args.operationId,
      state: 'succeeded',
      routeRevision: 7,
      demotion: 'succeeded',
    });
    expect(calls.slice(calls.indexOf('commitRouting') + 1).filter((c) => !c.startsWith('step:'))).toEqual([
      'readRoutingOutcome',
      'inspectDomain',
      'drainDomain',
      'sleepModels',
      'startTraining',
      'finishOperation',
    ]);
    // The target was never put back to sleep: the sleep and training calls are the old active's demotion.
    expect(calls).toContain('step:commitRouting:failed');
    expect(calls.filter((c) => c === 'step:commitRouting:succeeded')).toHaveLength(1);
    expect(progress.steps.find((s) => s.step === 'commitRouting')).toMatchObject({ status: 'succeeded' });
    expect(finished).toEqual([{ outcome: 'succeeded' }]);
  });

  it('a commit the state store did not answer is made again once it answers, after probing the target again', async () => {
    let isStoreDown = true;
    const { activities, calls, finished } = stubActivities({
      commitRouting: async () => {
        if (isStoreDown) throw ApplicationFailure.retryable('state store: connect ECONNREFUSED', 'StateStoreError');
        return { outcome: 'committed', routeRevision: 3 };
      },
      readRoutingOutcome: async () => {
        isStoreDown = false; // the store answers again
        return { isRoutingCommitted: false, routeRevision: null };
      },
    });
    const { args, result, progress } = await promoteToEnd(activities);
    expect(result).toEqual({
      operationId: args.operationId,
      state: 'succeeded',
      routeRevision: 3,
      demotion: 'succeeded',
    });
    const afterCommit = calls.slice(calls.indexOf('readRoutingOutcome')).filter((c) => !c.startsWith('step:'));
    expect(afterCommit).toEqual([
      'readRoutingOutcome',
      'probeModels',
      'commitRouting',
      'inspectDomain',
      'drainDomain',
      'sleepModels',
      'startTraining',
      'finishOperation',
    ]);
    expect(calls).not.toContain('restoreStandby');
    expect(calls.filter((c) => c === 'step:probeModels:succeeded')).toHaveLength(2);
    expect(progress.steps.find((s) => s.step === 'commitRouting')).toMatchObject({ status: 'succeeded' });
    expect(finished).toEqual([{ outcome: 'succeeded' }]);
  });

  it('a commit the state store answered only past commitOutageBudgetMs compensates, saying why', async () => {
    const { activities, calls, finished } = stubActivities({
      commitRouting: async () => {
        throw ApplicationFailure.retryable('state store: connect ECONNREFUSED', 'StateStoreError');
      },
    });
    // The commit's own budget (3 s) is already past this outage budget when the store answers.
    const failure = await promotionFailure(activities, input(fastPolicy({ commitOutageBudgetMs: 1_000 })));
    expect(failure.message).toMatch(/^promotion failed at commitRouting: .*past its outage budget/);
    expect(calls.slice(calls.indexOf('readRoutingOutcome')).filter((c) => !c.startsWith('step:'))).toEqual([
      'readRoutingOutcome',
      'restoreStandby',
      'finishOperation',
    ]);
    expect(finished[0]).toMatchObject({ outcome: 'failed', error: { step: 'commitRouting' } });
  });

  it('a refused target fails the operation at begin without touching any host', async () => {
    const { activities, calls, finished } = stubActivities({
      beginOperation: async () => {
        throw ApplicationFailure.nonRetryable('domain b is the active domain of fleet f', FailureType.InvalidTarget);
      },
    });
    const failure = await promotionFailure(activities);
    expect(failure.type).toBe(FailureType.InvalidTarget);
    expect(calls).toEqual(['beginOperation', 'finishOperation']);
    expect(finished).toEqual([
      {
        outcome: 'failed',
        error: { step: 'begin', code: FailureType.InvalidTarget, message: 'domain b is the active domain of fleet f' },
      },
    ]);
  });

  it('a failed demotion of the old active does not fail the promotion', async () => {
    const { activities, finished } = stubActivities({
      drainDomain: async () => {
        throw ApplicationFailure.nonRetryable('supervisor refused our token', FailureType.Unauthorized);
      },
    });
    const { result } = await promoteToEnd(activities);
    expect(result).toMatchObject({ state: 'succeeded', demotion: 'failed' });
    // Succeeded, with the demotion's failure kept on the operation row for whoever reads it.
    expect(finished).toEqual([
      {
        outcome: 'succeeded',
        error: {
          step: 'demoteOldActive',
          code: 'DemotionFailed',
          message: 'demotion failed at drain: supervisor refused our token',
        },
      },
    ]);
  });
});

describe('demotionWorkflow runbook', () => {
  it('refuses the active domain before touching it', async () => {
    const { activities, calls } = stubActivities({
      inspectDomain: async (i) => ({
        id: i.domainId,
        slug: 'a',
        isActive: true,
        inferenceSlotCount: 1,
        trainingSlotCount: 1,
        policy: fastPolicy(),
      }),
    });
    const failure = await withWorker(activities, async (taskQueue) =>
      failureOf(
        server.client.workflow.execute(demotionWorkflow, {
          taskQueue,
          workflowId: uniqueTaskQueue('demote'),
          args: [{ fleetId: STUB.fleet, domainId: STUB.active }],
        }),
      ),
    );
    expect(failure).toMatchObject({
      type: FailureType.InvalidTarget,
      message: 'demotion refused: domain a is the active domain; refusing to demote it',
    });
    expect(calls).toEqual(['inspectDomain']);
  });

  it('drains, sleeps and trains, and ends its operation succeeded', async () => {
    const { activities, calls, finished } = stubActivities();
    const result = await withWorker(activities, async (taskQueue) =>
      server.client.workflow.execute(demotionWorkflow, {
        taskQueue,
        workflowId: uniqueTaskQueue('demote'),
        args: [{ fleetId: STUB.fleet, operationId: STUB.op, domainId: STUB.standby }],
      }),
    );
    expect(result).toEqual({ domainId: STUB.standby, state: 'succeeded', drained: true });
    expect(calls.filter((c) => !c.startsWith('step:'))).toEqual([
      'beginOperation',
      'drainDomain',
      'sleepModels',
      'startTraining',
      'finishOperation',
    ]);
    expect(finished).toEqual([{ outcome: 'succeeded' }]);
  });

  it('an abort of a demotion operation cancels the waiting step and ends the operation cancelled', async () => {
    const { activities, calls, finished } = stubActivities({ sleepModels: waitsForever('models not asleep') });
    const failure = await withWorker(activities, async (taskQueue) => {
      const handle = await server.client.workflow.start(demotionWorkflow, {
        taskQueue,
        workflowId: uniqueTaskQueue('demote'),
        args: [{ fleetId: STUB.fleet, operationId: STUB.op, domainId: STUB.standby, policy: fastPolicy() }],
      });
      await eventually('sleepModels to run', () => calls.includes('sleepModels'));
      await handle.signal(abortSignal, { reason: 'keep it awake' });
      return failureOf(handle.result());
    });
    expect(failure.message).toContain('keep it awake');
    expect(calls).not.toContain('startTraining');
    expect(finished).toEqual([
      { outcome: 'cancelled', error: { step: 'sleepModels', code: 'Aborted', message: 'keep it awake' } },
    ]);
  });
});
