import { readFileSync } from 'node:fs';
import { readOwnerOnlyFile } from '../lib/secret-file';
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
export const readSecretFile = (variable: string, file: string): Buffer =>
  readOwnerOnlyFile(file, variable, (message) => new ConfigError(message));
