import { ago, ID, NOW, progress, promotion, step } from '../../test/support/fleet-page-fixtures';
import { operationRow, operationsToShow, SHOWN_OPERATIONS, stepRow } from './operation-rows';

const slugOf = (id: string) => ({ [ID.a]: 'a', [ID.b]: 'b' })[id] ?? id;

describe('operationRow', () => {
  it('shows a finished promotion with its outcome, age, duration and each step with its own duration', () => {
    const steps = progress([
      step({ step: 'stopTraining', startedAt: ago(29_800), finishedAt: ago(28_600) }),
      step({ step: 'wakeModels', startedAt: ago(28_600), finishedAt: ago(28_100), attempts: 2 }),
      step({
        step: 'demoteOldActive',
        status: 'failed',
        startedAt: ago(28_100),
        finishedAt: ago(25_600),
        lastError: 'host down',
      }),
    ]);
    expect(operationRow(promotion(), steps, slugOf, NOW)).toEqual({
      id: ID.op,
      kind: 'promote',
      target: 'b',
      from: 'a',
      outcome: 'succeeded',
      outcomeText: 'succeeded',
      tone: 'ok',
      age: '30 s ago',
      duration: '4.2 s',
      reason: 'drill',
      requestedBy: 'api:oncall',
      workflowId: `haru/${ID.fleet}/op/${ID.op}`,
      workflowUrl: null,
      error: null,
      steps: [
        { name: 'stopTraining', status: 'succeeded', tone: 'ok', duration: '1.2 s', note: null },
        { name: 'wakeModels', status: 'succeeded', tone: 'ok', duration: '500 ms', note: '2 attempts' },
        { name: 'demoteOldActive', status: 'failed', tone: 'bad', duration: '2.5 s', note: 'host down' },
      ],
    });
  });

  it('times an operation and a step in flight up to now, and says when the workflow gave no steps', () => {
    const running = promotion({ state: 'running', finishedAt: null, startedAt: ago(3_000) });
    const row = operationRow(running, null, slugOf, NOW);
    expect(row).toMatchObject({ outcome: 'running', tone: 'warn', duration: '3.0 s so far', steps: null });
    expect(stepRow(step({ step: 'wakeModels', status: 'running', startedAt: ago(1_500) }), NOW)).toEqual({
      name: 'wakeModels',
      status: 'running',
      tone: 'warn',
      duration: '1.5 s so far',
      note: null,
    });
    expect(stepRow(step({ step: 'probeModels', status: 'pending', attempts: 0 }), NOW).duration).toBeNull();
  });

  it('reads a succeeded promotion whose old active’s demotion failed as not demoted, with that failure', () => {
    const undemoted = promotion({
      error: { step: 'demoteOldActive', code: 'SupervisorUnreachable', message: 'old active unreachable' },
    });
    expect(operationRow(undemoted, null, slugOf, NOW)).toMatchObject({
      outcome: 'succeeded',
      outcomeText: 'succeeded (not demoted)',
      tone: 'warn',
      error: 'demoteOldActive: SupervisorUnreachable: old active unreachable',
    });
  });

  it('shows a failed operation’s error as step: code: message, and a domain no longer in the fleet by its id', () => {
    const failed = promotion({
      state: 'failed',
      targetDomainId: ID.c,
      error: { step: 'probeModels', code: 'ProbeFailed', message: 'llama answered 500' },
    });
    expect(operationRow(failed, undefined, slugOf, NOW)).toMatchObject({
      target: ID.c,
      tone: 'bad',
      error: 'probeModels: ProbeFailed: llama answered 500',
    });
  });
});

describe('operationsToShow', () => {
  it('shows the newest few, and the last failed one even when it is older', () => {
    const ops = Array.from({ length: 8 }, (_, i) =>
      promotion({ id: `op-${i}`, state: i === 6 ? 'failed' : 'cancelled' }),
    );
    const { shown, lastFailed } = operationsToShow(ops);
    expect(shown.map((o) => o.id)).toEqual(ops.slice(0, SHOWN_OPERATIONS).map((o) => o.id));
    expect(lastFailed?.id).toBe('op-6');
    expect(
      operationsToShow([promotion({ id: 'new' }), promotion({ id: 'old', state: 'failed' })]).lastFailed,
    ).toBeNull();
  });
});
