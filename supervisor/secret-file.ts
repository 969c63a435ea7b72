import { readFileSync, statSync } from 'node:fs';
import { ConfigError } from '../schemas/env';

/** Reads the file `variable` names; an unreadable file is a ConfigError naming the variable. */
export function readConfigFile(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
}

/** Like readConfigFile, and refuses a file that group or others may read: a secret must be its owner's alone. */
export function readSecretFile(variable: string, file: string): Buffer {
  const content = readConfigFile(variable, file);
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) {
    throw new ConfigError(
      `${variable}: ${file} is readable by others (mode ${mode.toString(8).padStart(4, '0')}); chmod 600 it`,
    );
  }
  return content;
}
