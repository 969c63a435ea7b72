import path from 'node:path';
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

/**
 * The prefix of every variable a layout may name as a secret (`supervisor.tokenEnv`, `upstreamAuth.env`): the
 * worker and the API send what such a variable holds to a host, so a layout may name only variables put there
 * for that, never the control plane's own (`HARU_API_TOKEN`, `DATABASE_URL`, a cloud key), whatever they are
 * called. An allow-list: a deny-list misses the secret nobody thought of.
 */
export const SECRET_ENV_PREFIX = 'HARU_SECRET_';

/** Where a layout's secret files must be when HARU_SECRETS_DIR is unset. */
export const DEFAULT_SECRETS_DIR = '/etc/haru/secrets';

/**
 * The directory a layout's secret files (`supervisor.tokenFile`, `upstreamAuth.file`) must be in:
 * HARU_SECRETS_DIR of the process that validates or reads the layout, else DEFAULT_SECRETS_DIR; absolute.
 */
export const secretsDir = (env: Readonly<Record<string, string | undefined>> = process.env): string =>
  path.resolve(env.HARU_SECRETS_DIR?.trim() || DEFAULT_SECRETS_DIR);

/** Why a layout may not name variable `name` as a secret, or null when it may. */
export const secretEnvProblem = (name: string): string | null =>
  name.startsWith(SECRET_ENV_PREFIX) && name.length > SECRET_ENV_PREFIX.length
    ? null
    : `must start with ${SECRET_ENV_PREFIX}: a layout names only variables meant to be sent to a host (docs/architecture.md §9.5)`;

/**
 * Why a layout may not name `file` as a secret, or null when it may: it must be an absolute path inside `dir`
 * (`..` resolved first). The worker sends what it holds to a host, so a layout may not point it at any other
 * file the worker can read (the API's token file, the supervisor CA's key).
 */
export function secretFileProblem(file: string, dir: string = secretsDir()): string | null {
  if (!path.isAbsolute(file)) return `must be an absolute path in ${dir} (HARU_SECRETS_DIR)`;
  const relative = path.relative(dir, path.resolve(file));
  if (!relative || relative.startsWith('..') || path.isAbsolute(relative)) {
    return `must be a file in ${dir} (HARU_SECRETS_DIR), where only secrets meant for hosts are kept`;
  }
  return null;
}

/**
 * Why a layout may not name `ref` (an `upstreamAuth`), or null: the reference and what is wrong with it. For the
 * processes that send the token, so a layout stored before the allow-list was checked is refused there too.
 */
export function secretRefProblem(ref: SecretRef, dir: string = secretsDir()): string | null {
  const [named, problem] =
    'env' in ref ? [ref.env, secretEnvProblem(ref.env)] : [ref.file, secretFileProblem(ref.file, dir)];
  return problem && `upstreamAuth ${named} ${problem}`;
}

/** A secret variable name a layout may use (see SECRET_ENV_PREFIX). */
export const layoutSecretEnvSchema = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
  .superRefine((name, ctx) => {
    const problem = secretEnvProblem(name);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** A secret file a layout may name: checked against HARU_SECRETS_DIR when the layout is validated. */
export const layoutSecretFileSchema = z
  .string()
  .min(1)
  .superRefine((file, ctx) => {
    const problem = secretFileProblem(file);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

/** A secret reference of a layout (`upstreamAuth`): a secretRefSchema within the layout's allow-list. */
export const layoutSecretRefSchema = z.union([
  z.strictObject({ env: layoutSecretEnvSchema }),
  z.strictObject({ file: layoutSecretFileSchema }),
]);
