import { z } from 'zod';
import { refusedLegacyVariables } from './legacy-env';

/** Wraps an env schema so that a blank value (`FOO=`) counts as unset and takes the default. */
export const blankable = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), schema);

export const portSchema = z.coerce.number().int().min(0).max(65_535);
export const positiveMsSchema = z.coerce.number().int().positive();

/** Formats a ZodError as one line per problem, each naming the variable or JSON path. */
export function formatZodError(error: z.ZodError, prefix = ''): string {
  return error.issues
    .map((issue) => {
      const at = issue.path.length ? issue.path.map(String).join('.') : '(root)';
      return `${prefix}${at}: ${issue.message}`;
    })
    .join('\n');
}

/**
 * Parses `env` with `schema`; on failure throws a ConfigError listing every bad variable. A variable of the
 * original project that Haru does not read (schemas/legacy-env.ts) is one of them, naming what replaces it.
 */
export function parseEnv<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv, what: string): z.infer<T> {
  const refused = refusedLegacyVariables(env).map((line) => `  ${line}`);
  const parsed = schema.safeParse(env);
  const problems = [...refused, ...(parsed.success ? [] : [formatZodError(parsed.error, '  ')])];
  if (problems.length) throw new ConfigError(`invalid ${what} environment:\n${problems.join('\n')}`);
  return parsed.data as z.infer<T>;
}

/** A configuration problem found at boot: printed as-is, exit code 2, never a stack trace. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
