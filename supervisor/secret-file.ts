import { readFileSync } from 'node:fs';
import { ConfigError } from '../schemas/env';

/** Reads the file `variable` names; an unreadable file is a ConfigError naming the variable. */
export function readConfigFile(variable: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ConfigError(`${variable}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
}
