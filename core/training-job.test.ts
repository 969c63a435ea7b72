import type { TrainingJob, TrainingJobEvent, TrainingJobState } from '../schemas/training-job';
import { TRAINING_JOB_STATES, TRAINING_JOB_TRANSITIONS } from '../schemas/training-job';
import { type JobMachineFields, nextJobState, pickNextJob } from './training-job';

const DOMAIN = '00000000-0000-4000-8000-00000000000d';

function job(overrides: Partial<JobMachineFields> = {}): JobMachineFields {
  return {
    state: 'queued',
    steps: 1000,
    runGeneration: 0,
    domainId: null,
    gpuIndex: null,
    preemptedAtStep: null,
    checkpoint: null,
    reason: null,
    ...overrides,
  };
}

const running = (generation = 1, overrides: Partial<JobMachineFields> = {}) =>
  job({ state: 'running', runGeneration: generation, domainId: DOMAIN, gpuIndex: 0, ...overrides });

/** Applies events in order, failing the test on the first refusal. */
function replay(start: JobMachineFields, events: TrainingJobEvent[]): JobMachineFields {
  return events.reduce((current, event) => {
    const result = nextJobState(current, event);
    if (!result.ok) throw new Error(`${event.type} refused: ${result.reason}`);
    return result.job;
  }, start);
}

const start: TrainingJobEvent = { type: 'start', domainId: DOMAIN, gpuIndex: 1 };

describe('nextJobState', () => {
  it('starts a queued job as generation 1 in the slot it was given', () => {
    expect(nextJobState(job(), start)).toEqual({
      ok: true,
      job: job({ state: 'running', runGeneration: 1, domainId: DOMAIN, gpuIndex: 1 }),
    });
  });

  it('keeps the rest of the row as it was', () => {
    const row = { ...job(), id: 'j1', adapterName: 'a' };
    const result = nextJobState(row, start);
    expect(result.ok && result.job).toMatchObject({ id: 'j1', adapterName: 'a', state: 'running' });
  });

  it('runs the whole life: checkpoint, preempt at the checkpoint, restart as a new generation, succeed', () => {
    const after = replay(job(), [
      start,
      { type: 'checkpointCommitted', generation: 1, step: 100, path: '/ckpt/100' },
      { type: 'preempt', generation: 1 },
    ]);
    expect(after).toMatchObject({ state: 'preempted', preemptedAtStep: 100, runGeneration: 1 });
    const resumed = replay(after, [{ type: 'start', domainId: DOMAIN, gpuIndex: 2 }]);
    expect(resumed).toMatchObject({
      state: 'running',
      runGeneration: 2,
      gpuIndex: 2,
      preemptedAtStep: null,
      checkpoint: { step: 100, path: '/ckpt/100', generation: 1 },
    });
    const done = replay(resumed, [
      { type: 'checkpointCommitted', generation: 2, step: 1000, path: '/ckpt/1000' },
      { type: 'succeed', generation: 2 },
    ]);
    expect(done).toMatchObject({ state: 'succeeded', checkpoint: { step: 1000, generation: 2 } });
  });

  it('preempts a job with no checkpoint at step 0', () => {
    expect(replay(running(), [{ type: 'preempt', generation: 1 }])).toMatchObject({ preemptedAtStep: 0 });
  });

  describe('fencing: only the current run generation speaks for the job', () => {
    it.each<TrainingJobEvent>([
      { type: 'checkpointCommitted', generation: 1, step: 500, path: '/ckpt/500' },
      { type: 'preempt', generation: 1 },
      { type: 'succeed', generation: 1 },
      { type: 'fail', generation: 1, reason: 'oom' },
    ])('refuses $type from an older generation', (event) => {
      expect(nextJobState(running(2), event)).toEqual({
        ok: false,
        code: 'stale_generation',
        reason: "run generation 1 is not the job's current run (2)",
      });
    });

    it('refuses a generation that never ran', () => {
      expect(nextJobState(running(1), { type: 'succeed', generation: 2 })).toMatchObject({ code: 'stale_generation' });
      expect(nextJobState(job(), { type: 'fail', generation: 1, reason: 'x' })).toMatchObject({
        code: 'stale_generation',
      });
    });

    it('refuses a checkpoint of the old run after a preemption was recorded, even of the same generation', () => {
      const preempted = job({ state: 'preempted', runGeneration: 1, preemptedAtStep: 0 });
      expect(
        nextJobState(preempted, { type: 'checkpointCommitted', generation: 1, step: 10, path: '/ckpt/10' }),
      ).toEqual({
        ok: false,
        code: 'illegal_transition',
        reason: 'a preempted job commits no checkpoint: only a running one does',
      });
    });
  });

  describe('checkpoints', () => {
    const committed = running(1, { checkpoint: { step: 200, path: '/ckpt/200', generation: 1 } });

    it('takes a retried commit of the same step, and a later one', () => {
      expect(
        nextJobState(committed, { type: 'checkpointCommitted', generation: 1, step: 200, path: '/c/200' }),
      ).toMatchObject({
        ok: true,
        job: { checkpoint: { step: 200, path: '/c/200' } },
      });
      expect(
        nextJobState(committed, { type: 'checkpointCommitted', generation: 1, step: 300, path: '/c/300' }),
      ).toMatchObject({
        ok: true,
        job: { state: 'running', checkpoint: { step: 300, generation: 1 } },
      });
    });

    it('refuses a step behind the committed one, and one beyond the job', () => {
      expect(nextJobState(committed, { type: 'checkpointCommitted', generation: 1, step: 150, path: '/c' })).toEqual({
        ok: false,
        code: 'invalid_checkpoint',
        reason: 'step 150 is behind the committed step 200',
      });
      expect(nextJobState(committed, { type: 'checkpointCommitted', generation: 1, step: 1001, path: '/c' })).toEqual({
        ok: false,
        code: 'invalid_checkpoint',
        reason: "step 1001 is beyond the job's 1000 steps",
      });
    });

    it('lets a resumed run commit a step of its own after the previous run’s checkpoint', () => {
      const resumed = running(2, { checkpoint: { step: 200, path: '/ckpt/200', generation: 1 } });
      expect(
        nextJobState(resumed, { type: 'checkpointCommitted', generation: 2, step: 250, path: '/c' }),
      ).toMatchObject({
        ok: true,
        job: { checkpoint: { step: 250, generation: 2 } },
      });
    });
  });

  describe('failing and cancelling', () => {
    it('fails a running job from its own run, keeping the reason', () => {
      expect(replay(running(3), [{ type: 'fail', generation: 3, reason: 'CUDA error' }])).toMatchObject({
        state: 'failed',
        reason: 'CUDA error',
      });
    });

    it('refuses to fail a running job without its generation: a stale reporter could not be told apart', () => {
      expect(nextJobState(running(), { type: 'fail', reason: 'x' })).toEqual({
        ok: false,
        code: 'illegal_transition',
        reason: 'a running job fails with its run generation',
      });
    });

    it.each<TrainingJobState>(['queued', 'preempted'])('fails a %s job without a generation', (state) => {
      expect(
        replay(job({ state, runGeneration: state === 'queued' ? 0 : 1 }), [
          { type: 'fail', reason: 'template removed' },
        ]),
      ).toMatchObject({
        state: 'failed',
        reason: 'template removed',
        preemptedAtStep: null,
      });
    });

    it.each<TrainingJobState>(['queued', 'running', 'preempted'])('cancels a %s job', (state) => {
      const before = state === 'running' ? running() : job({ state });
      expect(replay(before, [{ type: 'cancel' }])).toMatchObject({ state: 'cancelled', reason: 'cancelled' });
    });

    it('keeps where a cancelled running job ran, so the trainer to stop can be found', () => {
      expect(replay(running(1), [{ type: 'cancel', reason: 'not needed' }])).toMatchObject({
        domainId: DOMAIN,
        gpuIndex: 0,
        reason: 'not needed',
      });
    });
  });

  describe('refused transitions', () => {
    it.each<[TrainingJobState, TrainingJobEvent, string]>([
      ['succeeded', { type: 'cancel' }, 'a succeeded job cannot become cancelled'],
      ['failed', { type: 'cancel' }, 'a failed job cannot become cancelled'],
      ['cancelled', { type: 'cancel' }, 'a cancelled job cannot become cancelled'],
      ['succeeded', start, 'a succeeded job cannot become running'],
      ['running', start, 'a running job cannot become running'],
      ['cancelled', { type: 'fail', reason: 'x' }, 'a cancelled job cannot become failed'],
      ['preempted', { type: 'preempt', generation: 1 }, 'a preempted job cannot become preempted'],
      ['preempted', { type: 'succeed', generation: 1 }, 'a preempted job cannot become succeeded'],
      ['succeeded', { type: 'succeed', generation: 1 }, 'a succeeded job cannot become succeeded'],
    ])('refuses on a %s job: %j', (state, event, reason) => {
      const before = job({ state, runGeneration: 1 });
      expect(nextJobState(before, event)).toEqual({ ok: false, code: 'illegal_transition', reason });
    });

    it('takes exactly the edges of the transition table, for every state and event', () => {
      const events: TrainingJobEvent[] = [
        start,
        { type: 'preempt', generation: 1 },
        { type: 'succeed', generation: 1 },
        { type: 'fail', generation: 1, reason: 'x' },
        { type: 'cancel' },
      ];
      for (const state of TRAINING_JOB_STATES) {
        const taken = events.flatMap((event) => {
          const result = nextJobState(job({ state, runGeneration: 1 }), event);
          return result.ok ? [result.job.state] : [];
        });
        expect({ state, taken: [...taken].sort() }).toEqual({
          state,
          taken: [...TRAINING_JOB_TRANSITIONS[state]].sort(),
        });
      }
    });
  });
});

describe('pickNextJob', () => {
  type Queued = Pick<TrainingJob, 'id' | 'state' | 'baseModel' | 'priority' | 'createdAt'>;
  const queued = (id: string, overrides: Partial<Queued> = {}): Queued => ({
    id,
    state: 'queued',
    baseModel: 'qwen-7b',
    priority: 0,
    createdAt: '2026-12-01T00:00:00.000Z',
    ...overrides,
  });
  const slot = { baseModels: ['qwen-7b', 'llama-8b'] };

  it('picks the highest priority, then the oldest, then the lowest id', () => {
    const queue = [
      queued('b', { createdAt: '2026-12-01T00:00:02.000Z' }),
      queued('c', { createdAt: '2026-12-01T00:00:01.000Z' }),
      queued('a', { createdAt: '2026-12-01T00:00:01.000Z' }),
    ];
    expect(pickNextJob(queue, slot)?.id).toBe('a');
    expect(
      pickNextJob([...queue, queued('urgent', { priority: 5, createdAt: '2026-12-02T00:00:00.000Z' })], slot)?.id,
    ).toBe('urgent');
    expect(
      pickNextJob([queued('low', { priority: -1 }), queued('zero', { createdAt: '2026-12-09T00:00:00.000Z' })], slot)
        ?.id,
    ).toBe('zero');
  });

  it('takes only jobs whose base model the slot trains', () => {
    const queue = [
      queued('mistral', { baseModel: 'mistral-7b', priority: 9 }),
      queued('llama', { baseModel: 'llama-8b' }),
    ];
    expect(pickNextJob(queue, slot)?.id).toBe('llama');
    expect(pickNextJob(queue, { baseModels: ['gemma'] })).toBeNull();
  });

  it('takes a preempted job like a queued one, keeping its age, and never a running or finished one', () => {
    const queue = [
      queued('running', { state: 'running', priority: 9 }),
      queued('done', { state: 'succeeded', priority: 9 }),
      queued('new', { createdAt: '2026-12-02T00:00:00.000Z' }),
      queued('resumable', { state: 'preempted' }),
    ];
    expect(pickNextJob(queue, slot)?.id).toBe('resumable');
    expect(pickNextJob(queue.slice(0, 2), slot)).toBeNull();
    expect(pickNextJob([], slot)).toBeNull();
  });
});
