/**
 * Writes the JSON Schema files for the fleet layout and the supervisor config from the zod schemas.
 * `--check` fails (exit 1) when a committed file differs from what the schemas generate.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { JSON_SCHEMA_FILES, renderJsonSchema } from '../schemas/json-schema';

const root = path.resolve(__dirname, '..');
const check = process.argv.includes('--check');
let stale = 0;
for (const [file, schema] of Object.entries(JSON_SCHEMA_FILES)) {
  const target = path.join(root, 'schemas', 'json', file);
  const text = renderJsonSchema(schema, file);
  let current = '';
  try {
    current = readFileSync(target, 'utf8');
  } catch {
    // missing counts as stale
  }
  if (current === text) continue;
  if (check) {
    stale += 1;
    process.stderr.write(`schemas/json/${file} is stale: run \`npm run gen:schemas\` and commit it\n`);
  } else {
    writeFileSync(target, text);
    process.stdout.write(`wrote schemas/json/${file}\n`);
  }
}
process.exit(stale ? 1 : 0);
