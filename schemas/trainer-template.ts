import { z } from 'zod';

/**
 * Trainer templates: what the operator allows to run on the standby GPUs. A layout names each trainer (its
 * argv, the base models it can train, the typed parameters it takes); a training job later names a template
 * and fills those parameters only, so an API caller never chooses what a host executes
 * (docs/architecture.md §3.6).
 */

/** A template's name, slug-like because jobs, URLs and CLI arguments carry it. */
export const trainerTemplateNameSchema = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a slug: lowercase letters, digits and inner dashes (1-63)');

/** A parameter's name: an identifier, so it can become an argument or a variable name without quoting. */
export const trainerParamNameSchema = z
  .string()
  .regex(/^[a-z][A-Za-z0-9_]{0,63}$/, 'must start with a lowercase letter, then letters, digits or _ (1-64)');

export const TRAINER_PARAM_TYPES = ['string', 'integer', 'number', 'boolean'] as const;
export type TrainerParamType = (typeof TRAINER_PARAM_TYPES)[number];

/** The longest string a string parameter takes: a value ends up in a trainer's argv or environment. */
export const MAX_STRING_PARAM_LENGTH = 1024;

const description = z.string().min(1).max(500).optional();
/** A required parameter is always given by the job, so a default would never apply: declaring both is a mistake. */
const required = z.boolean().default(false);

const stringParamSchema = z.strictObject({
  type: z.literal('string'),
  description,
  required,
  default: z.string().max(MAX_STRING_PARAM_LENGTH).optional(),
  /** The only values allowed, when the trainer takes a choice (an optimizer's name). */
  values: z.array(z.string().max(MAX_STRING_PARAM_LENGTH)).min(1).optional(),
});

const integerParamSchema = z.strictObject({
  type: z.literal('integer'),
  description,
  required,
  default: z.int().optional(),
  min: z.int().optional(),
  max: z.int().optional(),
});

const numberParamSchema = z.strictObject({
  type: z.literal('number'),
  description,
  required,
  default: z.number().optional(),
  min: z.number().optional(),
  max: z.number().optional(),
});

const booleanParamSchema = z.strictObject({
  type: z.literal('boolean'),
  description,
  required,
  default: z.boolean().optional(),
});

/** One declared parameter: its type, whether a job must give it, its default and its bounds. */
export const trainerParamSchema = z
  .discriminatedUnion('type', [stringParamSchema, integerParamSchema, numberParamSchema, booleanParamSchema])
  .superRefine((param, ctx) => {
    if (param.required && param.default !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['default'],
        message: 'a required parameter is always given by the job: drop the default or required',
      });
    }
    if (param.type === 'integer' || param.type === 'number') {
      if (param.min !== undefined && param.max !== undefined && param.min > param.max) {
        ctx.addIssue({ code: 'custom', path: ['max'], message: `max ${param.max} is below min ${param.min}` });
      }
      if (param.default !== undefined && param.min !== undefined && param.default < param.min) {
        ctx.addIssue({
          code: 'custom',
          path: ['default'],
          message: `default ${param.default} is below min ${param.min}`,
        });
      }
      if (param.default !== undefined && param.max !== undefined && param.default > param.max) {
        ctx.addIssue({
          code: 'custom',
          path: ['default'],
          message: `default ${param.default} is above max ${param.max}`,
        });
      }
    }
    if (
      param.type === 'string' &&
      param.values &&
      param.default !== undefined &&
      !param.values.includes(param.default)
    ) {
      ctx.addIssue({ code: 'custom', path: ['default'], message: `default "${param.default}" is not one of values` });
    }
  });
export type TrainerParam = z.infer<typeof trainerParamSchema>;

/** A value a job gives a parameter: checked against the declaration by core/training-job-params.ts. */
export const trainerParamValueSchema = z.union([z.string().max(MAX_STRING_PARAM_LENGTH), z.number(), z.boolean()]);
export type TrainerParamValue = z.infer<typeof trainerParamValueSchema>;

export const trainerTemplateSchema = z
  .strictObject({
    name: trainerTemplateNameSchema,
    description,
    /** The trainer's argv, run as a slot's command is (§6.4): no shell. */
    command: z.array(z.string().min(1)).min(1),
    /** The base models (as jobs name them) this trainer can train; a job for another is refused. */
    baseModels: z.array(z.string().min(1).max(256)).min(1),
    params: z.record(trainerParamNameSchema, trainerParamSchema).default({}),
  })
  .superRefine((template, ctx) => {
    const seen = new Set<string>();
    template.baseModels.forEach((model, i) => {
      if (seen.has(model)) {
        ctx.addIssue({ code: 'custom', path: ['baseModels', i], message: `duplicate base model "${model}"` });
      }
      seen.add(model);
    });
  });
export type TrainerTemplate = z.infer<typeof trainerTemplateSchema>;
export type TrainerTemplateInput = z.input<typeof trainerTemplateSchema>;

/** The layout's `training` section: the trainer templates jobs may name. */
export const trainingLayoutSchema = z
  .strictObject({
    templates: z.array(trainerTemplateSchema).default([]),
  })
  .superRefine((training, ctx) => {
    const seen = new Set<string>();
    training.templates.forEach((template, i) => {
      if (seen.has(template.name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['templates', i, 'name'],
          message: `duplicate trainer template name "${template.name}"`,
        });
      }
      seen.add(template.name);
    });
  });
export type TrainingLayout = z.infer<typeof trainingLayoutSchema>;
