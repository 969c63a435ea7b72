import type { ModelStatus, SupervisorStatus, TrainingRunStatus } from '../schemas/supervisor';
import { isAtRest, planStandbyRestore, type StandbyLayout } from './standby-restore';

const AT = '2026-01-01T00:00:00.000Z';
const LAYOUT: StandbyLayout = {
  inference: [
    { gpuIndex: 0, models: ['a'] },
    { gpuIndex: 1, models: ['b'] },
  ],
  trainingGpus: [0, 1],
};

const model = (
  name: string,
  gpuIndex: number,
  state: ModelStatus['state'],
  error: string | null = null,
): ModelStatus => ({
  name,
  gpuIndex,
  port: 1,
  state,
  runningRequests: 0,
  error,
});
const run = (gpuIndex: number, state: TrainingRunStatus['state']): TrainingRunStatus => ({
  gpuIndex,
  state,
  pids: state === 'idle' ? [] : [100 + gpuIndex],
  startedAt: null,
  lastExit: null,
});
const status = (models: ModelStatus[], training: TrainingRunStatus[]): SupervisorStatus => ({
  models,
  training,
  at: AT,
});

describe('planStandbyRestore', () => {
  it('has nothing to do for a standby at rest (models asleep, training running)', () => {
    const plan = planStandbyRestore(
      LAYOUT,
      status([model('a', 0, 'asleep'), model('b', 1, 'asleep')], [run(0, 'running'), run(1, 'running')]),
    );
    expect(plan).toEqual({ sleepGpus: [], startTrainingGpus: [], unrestorable: [] });
    expect(isAtRest(plan)).toBe(true);
  });

  it('sleeps the awake GPUs first and starts their training only once they are asleep', () => {
    const awake = status([model('a', 0, 'awake'), model('b', 1, 'awake')], [run(0, 'idle'), run(1, 'idle')]);
    expect(planStandbyRestore(LAYOUT, awake)).toEqual({ sleepGpus: [0, 1], startTrainingGpus: [], unrestorable: [] });
    const slept = status([model('a', 0, 'asleep'), model('b', 1, 'asleep')], [run(0, 'idle'), run(1, 'idle')]);
    expect(planStandbyRestore(LAYOUT, slept)).toEqual({ sleepGpus: [], startTrainingGpus: [0, 1], unrestorable: [] });
  });

  it('puts back the healthy GPU and reports the one whose model does not answer', () => {
    const plan = planStandbyRestore(
      LAYOUT,
      status([model('a', 0, 'awake'), model('b', 1, 'unknown', 'ECONNREFUSED')], [run(0, 'idle'), run(1, 'idle')]),
    );
    expect(plan.sleepGpus).toEqual([0]);
    expect(plan.startTrainingGpus).toEqual([]);
    expect(plan.unrestorable).toEqual([
      'model b on GPU 1 does not answer (ECONNREFUSED): cannot be put to sleep',
      'training not restarted on GPU 1: b does not answer',
    ]);
    const after = planStandbyRestore(
      LAYOUT,
      status([model('a', 0, 'asleep'), model('b', 1, 'unknown')], [run(0, 'idle'), run(1, 'idle')]),
    );
    expect(after.startTrainingGpus).toEqual([0]);
    expect(isAtRest(after)).toBe(false);
  });

  it('reports a model the supervisor does not list, a stopping run and a training GPU it does not know', () => {
    const plan = planStandbyRestore(LAYOUT, status([model('a', 0, 'asleep')], [run(0, 'stopping')]));
    expect(plan.unrestorable).toEqual([
      'model b on GPU 1 is not reported: cannot be put to sleep',
      'training on GPU 0 is still stopping',
      'training on GPU 1 is not configured on the supervisor',
    ]);
    expect(plan.startTrainingGpus).toEqual([]);
  });
});
