import { trainerTemplateSchema } from '../schemas/trainer-template';
import { trainingJobSpecSchema } from '../schemas/training-job';
import { checkJobAgainstTemplates, resolveJobParams } from './training-job-params';

const template = trainerTemplateSchema.parse({
  name: 'lora-sft',
  command: ['python', 'train.py'],
  baseModels: ['qwen-7b', 'llama-8b'],
  params: {
    learningRate: { type: 'number', min: 0, max: 1, default: 0.0002 },
    rank: { type: 'integer', min: 1, max: 256, default: 16 },
    optimizer: { type: 'string', values: ['adamw', 'sgd'], default: 'adamw' },
    packing: { type: 'boolean' },
    runName: { type: 'string', required: true },
  },
});

const spec = (overrides: Record<string, unknown> = {}) =>
  trainingJobSpecSchema.parse({
    template: 'lora-sft',
    baseModel: 'qwen-7b',
    adapterName: 'support-bot-v2',
    dataset: 's3://datasets/support.jsonl',
    steps: 1000,
    params: { runName: 'r1' },
    ...overrides,
  });

describe('resolveJobParams', () => {
  it('fills the declared defaults and leaves an optional parameter without one out', () => {
    expect(resolveJobParams(template.params, { runName: 'r1', rank: 8 })).toEqual({
      ok: true,
      params: { runName: 'r1', rank: 8, learningRate: 0.0002, optimizer: 'adamw' },
    });
  });

  it('accepts values at the bounds', () => {
    expect(
      resolveJobParams(template.params, { runName: 'r', rank: 256, learningRate: 0, packing: true }),
    ).toMatchObject({
      ok: true,
    });
  });

  it('names every problem at $.params.<name>', () => {
    const result = resolveJobParams(template.params, {
      rank: 2.5,
      learningRate: 3,
      optimizer: 'lion',
      packing: 'yes',
      epochs: 3,
    });
    expect(result).toEqual({
      ok: false,
      problems: [
        { path: '$.params.rank', message: 'must be an integer' },
        { path: '$.params.learningRate', message: 'must be at most 1' },
        { path: '$.params.optimizer', message: 'must be one of "adamw", "sgd"' },
        { path: '$.params.packing', message: 'must be a boolean' },
        { path: '$.params.epochs', message: 'is not a parameter of the template' },
        { path: '$.params.runName', message: 'is required' },
      ],
    });
  });

  it.each([
    ['rank 0', { rank: 0 }, '$.params.rank', 'must be at least 1'],
    ['rank "16"', { rank: '16' }, '$.params.rank', 'must be an integer'],
    ['learningRate NaN', { learningRate: Number.NaN }, '$.params.learningRate', 'must be a number'],
    ['learningRate Infinity', { learningRate: Number.POSITIVE_INFINITY }, '$.params.learningRate', 'must be a number'],
    ['runName 7', { runName: 7 }, '$.params.runName', 'must be a string'],
    [
      'runName of 1025 characters',
      { runName: 'x'.repeat(1025) },
      '$.params.runName',
      'must be at most 1024 characters',
    ],
  ])('refuses %s', (_label, given, path, message) => {
    expect(resolveJobParams(template.params, { runName: 'r', ...given })).toEqual({
      ok: false,
      problems: [{ path, message }],
    });
  });

  it('quotes a name that is not an identifier in the path', () => {
    expect(resolveJobParams({}, { 'a-b': 1 })).toEqual({
      ok: false,
      problems: [{ path: '$.params["a-b"]', message: 'is not a parameter of the template' }],
    });
  });
});

describe('checkJobAgainstTemplates', () => {
  it('returns the job with its parameters resolved, and its template', () => {
    expect(checkJobAgainstTemplates(spec(), [template])).toEqual({
      ok: true,
      template,
      spec: { ...spec(), params: { runName: 'r1', learningRate: 0.0002, rank: 16, optimizer: 'adamw' } },
    });
  });

  it('refuses a template the layout lacks, naming those it has', () => {
    expect(checkJobAgainstTemplates(spec({ template: 'dpo' }), [template])).toEqual({
      ok: false,
      problems: [{ path: '$.template', message: 'no trainer template "dpo" (the layout has: lora-sft)' }],
    });
    expect(checkJobAgainstTemplates(spec(), [])).toMatchObject({
      problems: [{ message: 'no trainer template "lora-sft" (the layout has: none)' }],
    });
  });

  it('refuses a base model the template does not train, and bad parameters, together', () => {
    expect(checkJobAgainstTemplates(spec({ baseModel: 'mistral-7b', params: {} }), [template])).toEqual({
      ok: false,
      problems: [
        { path: '$.baseModel', message: 'template "lora-sft" trains qwen-7b, llama-8b, not "mistral-7b"' },
        { path: '$.params.runName', message: 'is required' },
      ],
    });
  });
});
