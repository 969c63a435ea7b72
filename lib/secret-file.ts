import { readFileSync, statSync } from 'node:fs';

/** A secret file that cannot serve: unreadable, or nothing but whitespace. The message names the setting. */
export class SecretFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretFileError';
  }
}

/** How a secret is read and how a problem is reported (the caller's own error class, e.g. its ConfigError). */
export interface SecretReadOptions {
  read?: (file: string) => string;
  fail?: (message: string) => Error;
}

const readUtf8 = (file: string) => readFileSync(file, 'utf8');
const secretFileError = (message: string) => new SecretFileError(message);

/**
 * Reads a secret (a bearer token) from `file`, without the whitespace around it: the trailing newline of
 * `echo token > file`, of a Kubernetes or Docker secret, is not part of the token. `setting` names where the
 * path came from (`HARU_SUPERVISOR_TOKEN_FILE`, `domain east: supervisor.tokenFile`) and starts every error
 * message. Throws `fail(message)` (default SecretFileError) for an unreadable file or one holding only whitespace.
 */
export function readSecretFile(file: string, setting: string, opts: SecretReadOptions = {}): string {
  const fail = opts.fail ?? secretFileError;
  let text: string;
  try {
    text = (opts.read ?? readUtf8)(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw fail(`${setting}: cannot read ${file} (${code})`);
  }
  const secret = text.trim();
  if (!secret) throw fail(`${setting}: ${file} is empty`);
  return secret;
}

/**
 * A secret given either inline in `env[name]` or as a file in `env[`${name}_FILE`]` (the convention of the
 * official Docker images): the trimmed value, or undefined when neither is set. Both set is an error: which
 * one wins would be a guess. Throws `fail(message)` (default SecretFileError) naming the variable.
 */
export function secretFromEnv(
  env: Readonly<Record<string, unknown>>,
  name: string,
  opts: SecretReadOptions = {},
): string | undefined {
  const text = (value: unknown) => (typeof value === 'string' ? value.trim() || undefined : undefined);
  const inline = text(env[name]);
  const file = text(env[`${name}_FILE`]);
  if (inline && file) throw (opts.fail ?? secretFileError)(`${name} and ${name}_FILE are both set: set one`);
  return file ? readSecretFile(file, `${name}_FILE`, opts) : inline;
}

/**
 * Reads a private key file as it is (a Buffer, nothing trimmed), refusing one that group or others may read:
 * a key must be its owner's alone. Throws `fail(message)` (default SecretFileError) starting with `setting`.
 */
export function readOwnerOnlyFile(
  file: string,
  setting: string,
  fail: (message: string) => Error = secretFileError,
): Buffer {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (err) {
    throw fail(`${setting}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) {
    throw fail(`${setting}: ${file} is readable by others (mode ${mode.toString(8).padStart(4, '0')}); chmod 600 it`);
  }
  return content;
}
