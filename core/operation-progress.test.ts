import { ID } from './fleet-fixtures';
import {
  abortRequested,
  createProgress,
  startedSteps,
  stepFailed,
  stepSkipped,
  stepStarted,
  stepSucceeded,
  withPhase,
} from './operation-progress';

const plan = [
  { step: 'stopTraining', skipReason: null },
  { step: 'wakeModels', skipReason: null },
  { step: 'demoteOldActive', skipReason: 'no previous active domain' },
];
const T1 = '2030-01-01T00:00:01.000Z';
const T2 = '2030-01-01T00:00:02.000Z';

describe('progress bookkeeping', () => {
  it('starts with every planned step pending and skipped steps marked with their reason', () => {
    const p = createProgress(ID.op, 'promote', plan);
    expect(p).toMatchObject({ operationId: ID.op, kind: 'promote', phase: 'running', abortRequested: false });
    expect(p.steps.map((s) => [s.step, s.status, s.lastError])).toEqual([
      ['stopTraining', 'pending', null],
      ['wakeModels', 'pending', null],
      ['demoteOldActive', 'skipped', 'no previous active domain'],
    ]);
  });

  it('records start and end times and the attempt that succeeded', () => {
    let p = createProgress(ID.op, 'promote', plan);
    p = stepStarted(p, 'stopTraining', T1);
    expect(p.steps[0]).toMatchObject({ status: 'running', startedAt: T1, attempts: 1, finishedAt: null });
    p = stepSucceeded(p, 'stopTraining', T2, 3);
    expect(p.steps[0]).toEqual({
      step: 'stopTraining',
      status: 'succeeded',
      startedAt: T1,
      finishedAt: T2,
      attempts: 3,
      lastError: null,
    });
  });

  it('records a failure with its message', () => {
    let p = stepStarted(createProgress(ID.op, 'promote', plan), 'wakeModels', T1);
    p = stepFailed(p, 'wakeModels', T2, 'model llama still asleep', 2);
    expect(p.steps[1]).toMatchObject({
      status: 'failed',
      finishedAt: T2,
      attempts: 2,
      lastError: 'model llama still asleep',
    });
  });

  it('keeps the first start time when a step is restarted', () => {
    let p = stepStarted(createProgress(ID.op, 'promote', plan), 'wakeModels', T1);
    p = stepStarted(p, 'wakeModels', T2);
    expect(p.steps[1]?.startedAt).toBe(T1);
  });

  it('appends a step that was not planned (compensation)', () => {
    const p = stepStarted(createProgress(ID.op, 'promote', plan), 'compensate', T1);
    expect(p.steps.map((s) => s.step)).toEqual(['stopTraining', 'wakeModels', 'demoteOldActive', 'compensate']);
  });

  it('skips still-pending steps when the operation ends', () => {
    let p = stepStarted(createProgress(ID.op, 'promote', plan), 'stopTraining', T1);
    p = stepFailed(p, 'stopTraining', T2, 'boom');
    p = withPhase(p, 'failed');
    expect(p.phase).toBe('failed');
    expect(p.steps[1]).toMatchObject({ status: 'skipped', lastError: 'operation failed' });
    expect(withPhase(p, 'compensating').steps[1]?.status).toBe('skipped');
  });

  it('marks an explicit skip and an abort request', () => {
    const p = abortRequested(stepSkipped(createProgress(ID.op, 'promote', plan), 'wakeModels', 'aborted'));
    expect(p.abortRequested).toBe(true);
    expect(p.steps[1]).toMatchObject({ status: 'skipped', lastError: 'aborted' });
  });

  it('never mutates its input', () => {
    const p = createProgress(ID.op, 'promote', plan);
    const frozen = JSON.stringify(p);
    stepSucceeded(stepStarted(p, 'stopTraining', T1), 'stopTraining', T2);
    withPhase(abortRequested(p), 'cancelled');
    expect(JSON.stringify(p)).toBe(frozen);
  });

  it('lists the steps that started, in plan order', () => {
    let p = createProgress(ID.op, 'promote', plan);
    p = stepStarted(stepStarted(p, 'wakeModels', T2), 'stopTraining', T1);
    expect(startedSteps(p)).toEqual(['stopTraining', 'wakeModels']);
  });
});
