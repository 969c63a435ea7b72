import { type FleetLayout, fleetLayoutSchema } from '../../schemas/layout';
import { formatProblems, type InputProblem, inputProblems } from '../../schemas/issues';

/** A layout that failed validation; nothing was written. `problems` names every JSON path at fault. */
export class LayoutValidationError extends Error {
  constructor(readonly problems: InputProblem[]) {
    super(
      `invalid fleet layout (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${formatProblems(problems)}`,
    );
    this.name = 'LayoutValidationError';
  }
}

export type LayoutValidation = { ok: true; layout: FleetLayout } | { ok: false; problems: InputProblem[] };

/** Validates a whole layout document and reports every problem at once (never only the first). */
export function validateLayout(input: unknown): LayoutValidation {
  const parsed = fleetLayoutSchema.safeParse(input);
  return parsed.success ? { ok: true, layout: parsed.data } : { ok: false, problems: inputProblems(parsed.error) };
}

/** The parsed layout, or LayoutValidationError listing every problem. */
export function parseLayout(input: unknown): FleetLayout {
  const result = validateLayout(input);
  if (!result.ok) throw new LayoutValidationError(result.problems);
  return result.layout;
}
