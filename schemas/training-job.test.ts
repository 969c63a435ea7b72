import { inputProblems } from './issues';
import { TRAINING_JOB_HISTORY_TYPES, trainingJobEventSchema, trainingJobSpecSchema } from './training-job';

const spec = {
  template: 'lora-sft',
  baseModel: 'Qwen/Qwen2.5-7B-Instruct',
  adapterName: 'support-bot.v2',
  dataset: 's3://datasets/support.jsonl',
  steps: 1000,
};

const problems = (input: unknown) => {
  const parsed = trainingJobSpecSchema.safeParse(input);
  return parsed.success ? [] : inputProblems(parsed.error);
};

describe('training job spec', () => {
  it('fills priority 0, no parameters and no publishing', () => {
    expect(trainingJobSpecSchema.parse(spec)).toEqual({ ...spec, params: {}, priority: 0, publishOnSuccess: false });
  });

  it.each([
    ['adapterName', 'my adapter'],
    ['adapterName', 'org/adapter'],
    ['template', 'LoRA'],
    ['steps', 0],
    ['steps', 1.5],
    ['priority', 1001],
    ['dataset', ''],
  ])('refuses %s %j at its path', (key, value) => {
    expect(problems({ ...spec, [key]: value }).map((p) => p.path)).toEqual([`$.${key}`]);
  });

  it('refuses an unknown key, a parameter value that is not a scalar, and a missing field', () => {
    const { dataset: _dataset, ...withoutDataset } = spec;
    expect(problems({ ...withoutDataset, state: 'running', params: { rank: [16] } }).map((p) => p.path)).toEqual(
      expect.arrayContaining(['$.state', '$.params.rank', '$.dataset']),
    );
  });
});

describe('training job events', () => {
  it('refuses a checkpoint without its generation and a generation 0', () => {
    expect(trainingJobEventSchema.safeParse({ type: 'checkpointCommitted', step: 1, path: '/c' }).success).toBe(false);
    expect(trainingJobEventSchema.safeParse({ type: 'preempt', generation: 0 }).success).toBe(false);
    expect(trainingJobEventSchema.parse({ type: 'preempt', generation: 1 })).toEqual({
      type: 'preempt',
      generation: 1,
    });
  });
});

describe('training job history types', () => {
  it('are the submission and every event type, so each applied event can be recorded', () => {
    const eventTypes = trainingJobEventSchema.options.map((option) => option.shape.type.value);
    expect([...TRAINING_JOB_HISTORY_TYPES].sort()).toEqual(['submitted', ...eventTypes].sort());
  });
});
