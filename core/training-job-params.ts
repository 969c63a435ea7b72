import { type InputProblem, jsonPath } from '../schemas/issues';
import {
  MAX_STRING_PARAM_LENGTH,
  type TrainerParam,
  type TrainerParamValue,
  type TrainerTemplate,
} from '../schemas/trainer-template';
import type { TrainingJobSpec } from '../schemas/training-job';

export type ResolvedParams = Record<string, TrainerParamValue>;

/** Why one value does not fit its declaration, or null when it does. */
function valueProblem(param: TrainerParam, value: unknown): string | null {
  switch (param.type) {
    case 'boolean':
      return typeof value === 'boolean' ? null : 'must be a boolean';
    case 'string':
      if (typeof value !== 'string') return 'must be a string';
      if (value.length > MAX_STRING_PARAM_LENGTH) return `must be at most ${MAX_STRING_PARAM_LENGTH} characters`;
      if (param.values && !param.values.includes(value)) {
        return `must be one of ${param.values.map((v) => JSON.stringify(v)).join(', ')}`;
      }
      return null;
    case 'integer':
    case 'number': {
      if (typeof value !== 'number' || !Number.isFinite(value)) return `must be ${article(param.type)}`;
      if (param.type === 'integer' && !Number.isInteger(value)) return 'must be an integer';
      if (param.min !== undefined && value < param.min) return `must be at least ${param.min}`;
      if (param.max !== undefined && value > param.max) return `must be at most ${param.max}`;
      return null;
    }
  }
}

const article = (type: 'integer' | 'number') => (type === 'integer' ? 'an integer' : 'a number');

/**
 * A job's parameters checked against its template's declaration: every given value of the declared type and
 * within its bounds, no undeclared name, every required one given. On success, the values with the declared
 * defaults filled in, which is what the job stores (a later change of a default does not change a queued job).
 * Problems are located at `$.params.<name>`.
 */
export function resolveJobParams(
  declared: TrainerTemplate['params'],
  given: Readonly<Record<string, unknown>>,
): { ok: true; params: ResolvedParams } | { ok: false; problems: InputProblem[] } {
  const problems: InputProblem[] = [];
  const params: ResolvedParams = {};
  for (const [name, value] of Object.entries(given)) {
    const param = declared[name];
    const problem = param ? valueProblem(param, value) : 'is not a parameter of the template';
    if (problem) problems.push({ path: jsonPath(['params', name]), message: problem });
    else params[name] = value as TrainerParamValue;
  }
  for (const [name, param] of Object.entries(declared)) {
    if (name in given) continue;
    if (param.required) problems.push({ path: jsonPath(['params', name]), message: 'is required' });
    else if (param.default !== undefined) params[name] = param.default;
  }
  return problems.length ? { ok: false, problems } : { ok: true, params };
}

/**
 * A submitted job against the layout's templates: the template it names exists, trains its base model, and
 * takes its parameters. On success the job with its parameters resolved (defaults filled in).
 */
export function checkJobAgainstTemplates(
  spec: TrainingJobSpec,
  templates: readonly TrainerTemplate[],
): { ok: true; spec: TrainingJobSpec; template: TrainerTemplate } | { ok: false; problems: InputProblem[] } {
  const template = templates.find((t) => t.name === spec.template);
  if (!template) {
    const known = templates.map((t) => t.name).join(', ') || 'none';
    return {
      ok: false,
      problems: [{ path: '$.template', message: `no trainer template "${spec.template}" (the layout has: ${known})` }],
    };
  }
  const problems: InputProblem[] = [];
  if (!template.baseModels.includes(spec.baseModel)) {
    problems.push({
      path: '$.baseModel',
      message: `template "${template.name}" trains ${template.baseModels.join(', ')}, not "${spec.baseModel}"`,
    });
  }
  const params = resolveJobParams(template.params, spec.params);
  if (!params.ok) problems.push(...params.problems);
  if (problems.length || !params.ok) return { ok: false, problems };
  return { ok: true, spec: { ...spec, params: params.params }, template };
}
