import type { z } from 'zod';
import { type InputProblem, jsonPath } from './issues';

/**
 * What converting a file of the original project's format gives (schemas/legacy-layout.ts,
 * schemas/legacy-supervisor-config.ts): Haru's document as it would be written by hand (only what is set) and
 * every difference the conversion made, one line each; or every problem that stops it, by JSON path in the
 * original file.
 */
export type LegacyConversion<T> =
  { ok: true; document: T; changes: string[] } | { ok: false; problems: InputProblem[] };

/** A plain object (not an array, not null). */
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The issues of validating a converted document, located in the original file through `originalPath`; where the
 * field has another path in Haru's format, the message names that too.
 */
export function problemsInOriginal(
  error: z.ZodError,
  originalPath: (path: readonly PropertyKey[]) => PropertyKey[],
): InputProblem[] {
  return error.issues.map((issue) => {
    const original = jsonPath(originalPath(issue.path));
    const converted = jsonPath(issue.path);
    const where = original === converted ? '' : ` (${converted} in Haru's format)`;
    return { path: original, message: `${issue.message}${where}` };
  });
}
