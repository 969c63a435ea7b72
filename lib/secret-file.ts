import { closeSync, fstatSync, openSync, readFileSync } from 'node:fs';

/** A secret file that cannot serve: unreadable, or nothing but whitespace. The message names the setting. */
export class SecretFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretFileError';
  }
}

/** How a secret is read and how a problem is reported (the caller's own error class, e.g. its ConfigError). */
export interface SecretReadOptions {
  /** Reads the file instead of the file system (a test's, or a caller's own); the mode is then not checked. */
  read?: (file: string) => string;
  fail?: (message: string) => Error;
}

const errorCode = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;
const secretFileError = (message: string) => new SecretFileError(message);

/**
 * Reads a secret (a bearer token) from `file`, without the whitespace around it: the trailing newline of
 * `echo token > file`, of a Kubernetes or Docker secret, is not part of the token. `setting` names where the
 * path came from (`HARU_SUPERVISOR_TOKEN_FILE`, `domain east: supervisor.tokenFile`) and starts every error
 * message. A file that group or others may read is refused (readOwnerOnlyFile): a token anyone on the host can
 * read is no token. Throws `fail(message)` (default SecretFileError) for such a file, an unreadable one or one
 * holding only whitespace.
 */
export function readSecretFile(file: string, setting: string, opts: SecretReadOptions = {}): string {
  const fail = opts.fail ?? secretFileError;
  let text: string;
  if (opts.read) {
    try {
      text = opts.read(file);
    } catch (err) {
      throw fail(`${setting}: cannot read ${file} (${errorCode(err)})`);
    }
  } else {
    text = readOwnerOnlyFile(file, setting, fail).toString('utf8');
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
 * Reads a secret file as it is (a Buffer, nothing trimmed), refusing one that group or others may read: a key or
 * a token must be its owner's alone. The mode is the opened file's own (fstat), so a file swapped in between a
 * check and the read is still checked. Every secret file Haru reads goes through here: the key files, and the
 * token files of readSecretFile. Throws `fail(message)` (default SecretFileError) starting with `setting`,
 * naming the file and its mode.
 */
export function readOwnerOnlyFile(
  file: string,
  setting: string,
  fail: (message: string) => Error = secretFileError,
): Buffer {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw fail(`${setting}: cannot read ${file} (${errorCode(err)})`);
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if (mode & 0o077) {
      const octal = mode.toString(8).padStart(4, '0');
      throw fail(`${setting}: ${file} is open to group or others (mode ${octal}); chmod 600 it`);
    }
    try {
      return readFileSync(fd);
    } catch (err) {
      throw fail(`${setting}: cannot read ${file} (${errorCode(err)})`);
    }
  } finally {
    closeSync(fd);
  }
}
