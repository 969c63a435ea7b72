import type { z } from 'zod';

/** One problem found in an input document: where (a JSON path such as `$.domains[0].slug`) and what. */
export interface InputProblem {
  path: string;
  message: string;
}

/** `['domains', 0, 'slug']` -> `$.domains[0].slug`; keys that are not identifiers are quoted. */
export function jsonPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => {
    if (typeof key === 'number') return `${acc}[${key}]`;
    const name = String(key);
    return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? `${acc}.${name}` : `${acc}[${JSON.stringify(name)}]`;
  }, '$');
}

/**
 * Every issue of a ZodError as `{ path, message }`. Unknown keys are reported one per key, at the key's
 * own path, so a typo is located exactly.
 */
export function inputProblems(error: z.ZodError): InputProblem[] {
  return error.issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: jsonPath([...issue.path, key]), message: 'unknown key' }));
    }
    return [{ path: jsonPath(issue.path), message: issue.message }];
  });
}

/** Problems as lines for a terminal: `  $.domains[0].slug: must be a slug …`. */
export const formatProblems = (problems: readonly InputProblem[], indent = '  '): string =>
  problems.map((p) => `${indent}${p.path}: ${p.message}`).join('\n');
