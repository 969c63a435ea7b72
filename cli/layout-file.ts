import { readFile } from 'node:fs/promises';
import YAML from 'yaml';
import { ConfigError } from '../schemas/env';

const isYaml = (file: string) => /\.ya?ml$/i.test(file);

/** Reads a layout or config file: JSON, or YAML for `.yaml`/`.yml`. Unreadable or unparsable -> ConfigError. */
export async function readLayoutFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read layout file ${file}: ${(err as Error).message}`);
  }
  try {
    return isYaml(file) ? YAML.parse(text) : JSON.parse(text);
  } catch (err) {
    throw new ConfigError(
      `layout file ${file} is not valid ${isYaml(file) ? 'YAML' : 'JSON'}: ${(err as Error).message}`,
    );
  }
}

/** A document as the file named would hold it: YAML for `.yaml`/`.yml`, else JSON (two-space indent). */
export const renderLayoutFile = (file: string | undefined, document: unknown): string =>
  file && isYaml(file) ? YAML.stringify(document) : `${JSON.stringify(document, null, 2)}\n`;
