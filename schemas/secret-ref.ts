import { z } from 'zod';

/**
 * Where a secret is read: an environment variable of the process that needs it, or a file (its contents,
 * trimmed). Configs and layouts name the secret; they never hold it.
 */
export const secretRefSchema = z.union([
  z.strictObject({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name') }),
  z.strictObject({ file: z.string().min(1) }),
]);
export type SecretRef = z.infer<typeof secretRefSchema>;
