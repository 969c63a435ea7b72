import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { inputProblems } from './issues';
import { fleetLayoutSchema, type FleetLayoutInput } from './layout';

/** A valid layout with one trainer template; each test breaks one rule. */
function layout() {
  return {
    fleet: { slug: 'prod', activeDomain: 'east' },
    domains: [
      {
        slug: 'east',
        supervisorUrl: 'http://10.0.0.1:8701',
        slots: [{ kind: 'inference', gpuIndex: 0, models: [{ name: 'small', servingUrl: 'http://10.0.0.1:8000' }] }],
      },
    ],
    training: {
      templates: [
        {
          name: 'lora-sft',
          command: ['python', 'examples/lora-trainer.py'],
          baseModels: ['Qwen/Qwen2.5-7B-Instruct'],
          params: {
            learningRate: { type: 'number', default: 0.0002, min: 0, max: 1 },
            rank: { type: 'integer', default: 16, min: 1, max: 256 },
            optimizer: { type: 'string', values: ['adamw', 'sgd'], default: 'adamw' },
            packing: { type: 'boolean', default: false },
            runName: { type: 'string', required: true },
          },
        },
      ],
    },
  } satisfies FleetLayoutInput;
}

type Mutable = ReturnType<typeof layout> & { training: { templates: Record<string, unknown>[] } };
const template = (input: Mutable) => input.training.templates[0]!;
const params = (input: Mutable) => template(input).params as Record<string, Record<string, unknown>>;

function problemPaths(input: unknown): { path: string; message: string }[] {
  const parsed = fleetLayoutSchema.safeParse(input);
  return parsed.success ? [] : inputProblems(parsed.error);
}

describe('trainer templates in the fleet layout', () => {
  it('accepts a layout with templates, and fills required: false and empty params', () => {
    const input = layout() as Mutable;
    const withoutParams: Record<string, unknown> = template(input);
    delete withoutParams.params;
    const parsed = fleetLayoutSchema.parse(layout());
    expect(parsed.training?.templates[0]?.params.learningRate).toEqual({
      type: 'number',
      required: false,
      default: 0.0002,
      min: 0,
      max: 1,
    });
    expect(fleetLayoutSchema.parse(input).training?.templates[0]?.params).toEqual({});
  });

  it('keeps training optional: every committed example layout still parses, without a training section', () => {
    const examples = path.join(__dirname, '..', 'examples');
    const files = readdirSync(examples).filter((f) => f.endsWith('.layout.json'));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const parsed = fleetLayoutSchema.safeParse(JSON.parse(readFileSync(path.join(examples, file), 'utf8')));
      expect({ file, problems: parsed.success ? [] : inputProblems(parsed.error) }).toEqual({ file, problems: [] });
    }
    const { training: _none, ...withoutTraining } = layout();
    expect(fleetLayoutSchema.parse(withoutTraining).training).toBeUndefined();
  });

  it('refuses a duplicate template name at the second one', () => {
    const input = layout() as Mutable;
    input.training.templates.push({ ...template(input) });
    expect(problemPaths(input)).toEqual([
      { path: '$.training.templates[1].name', message: 'duplicate trainer template name "lora-sft"' },
    ]);
  });

  it.each([
    ['name', 'LoRA SFT', 'slug'],
    ['command', [], 'Too small'],
    ['baseModels', [], 'Too small'],
  ])('refuses a bad %s at its path', (key, value, message) => {
    const input = layout() as Mutable;
    template(input)[key] = value;
    expect(problemPaths(input)).toEqual([
      { path: `$.training.templates[0].${key}`, message: expect.stringContaining(message) },
    ]);
  });

  it('refuses an empty argv element and a duplicate base model at their index', () => {
    const input = layout() as Mutable;
    template(input).command = ['python', ''];
    template(input).baseModels = ['a', 'b', 'a'];
    expect(problemPaths(input).map((p) => p.path)).toEqual([
      '$.training.templates[0].command[1]',
      '$.training.templates[0].baseModels[2]',
    ]);
  });

  it('refuses unknown keys in the section, a template and a parameter, naming each', () => {
    const input = layout() as Mutable;
    (input.training as Record<string, unknown>).slots = [];
    template(input).shell = true;
    params(input).rank!.values = [1, 2];
    expect(problemPaths(input)).toEqual(
      expect.arrayContaining([
        { path: '$.training.slots', message: 'unknown key' },
        { path: '$.training.templates[0].shell', message: 'unknown key' },
        { path: '$.training.templates[0].params.rank.values', message: 'unknown key' },
      ]),
    );
  });

  it('refuses a parameter name that is not an identifier, and an unknown type', () => {
    const input = layout() as Mutable;
    params(input)['learning-rate'] = { type: 'number' };
    params(input).epochs = { type: 'float' };
    const problems = problemPaths(input).map((p) => p.path);
    expect(problems).toContain('$.training.templates[0].params["learning-rate"]');
    expect(problems).toContain('$.training.templates[0].params.epochs.type');
  });

  it('refuses min above max, and a default outside the bounds, at the field that is wrong', () => {
    const input = layout() as Mutable;
    params(input).rank = { type: 'integer', min: 8, max: 4 };
    params(input).learningRate = { type: 'number', min: 0, max: 1, default: 2 };
    expect(problemPaths(input)).toEqual([
      { path: '$.training.templates[0].params.learningRate.default', message: 'default 2 is above max 1' },
      { path: '$.training.templates[0].params.rank.max', message: 'max 4 is below min 8' },
    ]);
  });

  it('refuses a default of the wrong type, a fractional integer, and a default outside the values', () => {
    const input = layout() as Mutable;
    params(input).packing = { type: 'boolean', default: 'yes' };
    params(input).rank = { type: 'integer', default: 1.5 };
    params(input).optimizer = { type: 'string', values: ['adamw'], default: 'sgd' };
    expect(problemPaths(input)).toEqual([
      { path: '$.training.templates[0].params.rank.default', message: expect.stringContaining('int') },
      { path: '$.training.templates[0].params.optimizer.default', message: 'default "sgd" is not one of values' },
      { path: '$.training.templates[0].params.packing.default', message: expect.stringContaining('boolean') },
    ]);
  });

  it('refuses a required parameter with a default: the default could never apply', () => {
    const input = layout() as Mutable;
    params(input).runName = { type: 'string', required: true, default: 'x' };
    expect(problemPaths(input)).toEqual([
      {
        path: '$.training.templates[0].params.runName.default',
        message: 'a required parameter is always given by the job: drop the default or required',
      },
    ]);
  });
});
