import { readOwnerOnlyFile } from './secret-file';

/** Where a secret is read: an environment variable or a file (schemas/secret-ref.ts validates the shape). */
export type SecretRef = { env: string } | { file: string };

/**
 * Reads the secret `ref` names: the environment variable, or the file's trimmed contents. Throws an Error
 * naming `what` and the reference for an unset or blank variable, an unreadable file or an empty one (never
 * the secret itself).
 */
export function readSecretRef(
  ref: SecretRef,
  what: string,
  env: NodeJS.ProcessEnv,
  readFile: (file: string) => string,
): string {
  if ('env' in ref) {
    const value = (env[ref.env] ?? '').trim();
    if (!value) throw new Error(`${what} names ${ref.env}, which is not set`);
    return value;
  }
  let value: string;
  try {
    value = readFile(ref.file).trim();
  } catch (err) {
    throw new Error(`cannot read ${what} file ${ref.file}: ${(err as Error).message}`);
  }
  if (!value) throw new Error(`${what} file ${ref.file} is empty`);
  return value;
}

/**
 * The bearer tokens a layout's `upstreamAuth` names, read from this process's environment or files on first
 * use and kept for the process's life (rotating one means restarting the API and the worker, as for the
 * supervisor's own keys). Throws as readSecretRef, with `what` `upstreamAuth`.
 */
export function createUpstreamCredentials(
  env: NodeJS.ProcessEnv = process.env,
  // A token file group or others may read is refused, as every secret file is (lib/secret-file.ts).
  readFile: (file: string) => string = (file) => readOwnerOnlyFile(file, 'upstreamAuth').toString('utf8'),
) {
  const tokens = new Map<string, string>();
  return {
    token(ref: SecretRef): string {
      const key = 'env' in ref ? `env:${ref.env}` : `file:${ref.file}`;
      let token = tokens.get(key);
      if (token === undefined) {
        token = readSecretRef(ref, 'upstreamAuth', env, readFile);
        tokens.set(key, token);
      }
      return token;
    },
  };
}
export type UpstreamCredentials = ReturnType<typeof createUpstreamCredentials>;

/** This process's upstream credentials (the API's proxy and the worker's probe read the same references). */
export const upstreamCredentials = createUpstreamCredentials();
