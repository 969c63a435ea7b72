import { z } from 'zod';
import { inputProblems } from './issues';
import { isRecord, type LegacyConversion, problemsInOriginal } from './legacy-conversion';
import { type SupervisorConfigInput, supervisorConfigSchema } from './supervisor';

// The supervisor config (HARU_SUPERVISOR_CONFIG) of the project Haru grew from, as it accepted it: one `slots`
// list whose entries say their `kind`. Haru keeps inference and training slots in two lists.

const legacySupervisorSlotSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('inference'),
    gpuIndex: z.number().int().nonnegative(),
    models: z.array(z.strictObject({ name: z.string().min(1), port: z.number().int().min(1).max(65_535) })).min(1),
  }),
  z.strictObject({
    kind: z.literal('training'),
    gpuIndex: z.number().int().nonnegative(),
    command: z.array(z.string().min(1)).min(1),
    checkpointDir: z.string().min(1),
  }),
]);

export const legacySupervisorConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  slots: z.array(legacySupervisorSlotSchema).min(1),
});

/** A supervisor config of the original format: a `slots` list, and neither of Haru's `inference` and `training`. */
export const isLegacySupervisorConfig = (input: unknown): boolean =>
  isRecord(input) && Array.isArray(input.slots) && !('inference' in input) && !('training' in input);

/**
 * Converts a supervisor config of the original format to Haru's (docs/migration.md): each slot goes to the list
 * of its kind, in its order, without `kind`. The result is checked against Haru's schema before it is returned.
 */
export function convertLegacySupervisorConfig(input: unknown): LegacyConversion<SupervisorConfigInput> {
  const parsed = legacySupervisorConfigSchema.safeParse(input);
  if (!parsed.success) return { ok: false, problems: inputProblems(parsed.error) };
  const changes: string[] = [];
  if (parsed.data.$schema !== undefined) changes.push("dropped: $.$schema (it named the original's JSON Schema)");
  const document = { inference: [], training: [] } as Required<Pick<SupervisorConfigInput, 'inference' | 'training'>>;
  /** For each slot of `inference` and `training`, its index in the original `slots`. */
  const origin = { inference: [] as number[], training: [] as number[] };
  parsed.data.slots.forEach((slot, i) => {
    const list = slot.kind;
    const to = `$.${list}[${origin[list].length}]`;
    origin[list].push(i);
    if (slot.kind === 'inference') document.inference.push({ gpuIndex: slot.gpuIndex, models: slot.models });
    else document.training.push({ gpuIndex: slot.gpuIndex, command: slot.command, checkpointDir: slot.checkpointDir });
    changes.push(`moved: $.slots[${i}] (${slot.kind}, GPU ${slot.gpuIndex}) -> ${to}, without its "kind"`);
  });
  const checked = supervisorConfigSchema.safeParse(document);
  if (!checked.success) {
    const originalPath = (path: readonly PropertyKey[]): PropertyKey[] => {
      const [list, index, ...rest] = path;
      if ((list === 'inference' || list === 'training') && typeof index === 'number')
        return ['slots', origin[list][index]!, ...rest];
      return [...path];
    };
    return { ok: false, problems: problemsInOriginal(checked.error, originalPath) };
  }
  return { ok: true, document, changes };
}
