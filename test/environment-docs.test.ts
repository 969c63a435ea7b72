/**
 * Every variable a process reads is a key of its env schema, and every key has a row in that process's
 * documented table, and every row names a key: the docs cannot drift from what the code reads, either way.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { apiConfigSchema } from '../api/config';
import { cliEnvSchema } from '../cli/api-client';
import { devEnvSchema } from '../cli/dev/config';
import { dbEnvSchema } from '../db/config';
import { gpuHostEnvSchema } from '../deploy/gpu-host/main';
import { simEnvSchema } from '../sim/config';
import { fakeVllmEnvSchema } from '../sim/vllm/main';
import { supervisorEnvSchema } from '../supervisor/config';
import { workerConfigSchema } from '../workers/config';

const ROOT = path.resolve(__dirname, '..');
const VARIABLE = /^[A-Z][A-Z0-9_]*$/;

interface DocumentedProcess {
  name: string;
  schema: z.ZodObject;
  /** Where the schema is, for the message. */
  schemaFile: string;
  doc: string;
  /** The heading above the table, as written (its first table whose first column is `variable`). */
  heading: string;
}

const PROCESSES: DocumentedProcess[] = [
  {
    name: 'api',
    schema: apiConfigSchema,
    schemaFile: 'api/config.ts',
    doc: 'api/README.md',
    heading: '## Environment',
  },
  {
    name: 'worker',
    schema: workerConfigSchema,
    schemaFile: 'workers/config.ts',
    doc: 'README.md',
    heading: '### Worker (`haru worker`)',
  },
  {
    name: 'supervisor',
    schema: supervisorEnvSchema,
    schemaFile: 'supervisor/config.ts',
    doc: 'README.md',
    heading: '### Supervisor (`haru supervisor`, one per GPU host)',
  },
  {
    name: 'dev stack',
    schema: devEnvSchema,
    schemaFile: 'cli/dev/config.ts',
    doc: 'docs/dev-stack.md',
    heading: '## Environment of `haru dev`',
  },
  {
    name: 'simulated host',
    schema: simEnvSchema,
    schemaFile: 'sim/config.ts',
    doc: 'sim/README.md',
    heading: '## Environment of `haru sim domain`',
  },
  {
    name: 'fake vLLM',
    schema: fakeVllmEnvSchema,
    schemaFile: 'sim/vllm/main.ts',
    doc: 'sim/README.md',
    heading: '### Environment of the fake vLLM',
  },
  {
    name: 'GPU-host image',
    schema: gpuHostEnvSchema,
    schemaFile: 'deploy/gpu-host/main.ts',
    doc: 'deploy/README.md',
    heading: '## Environment of the GPU-host image',
  },
];

/** The schemas the overview table's "used by" column names; `tests` and `all` name no one process. */
const BY_USER: Record<string, z.ZodObject[]> = {
  api: [apiConfigSchema],
  worker: [workerConfigSchema],
  supervisor: [supervisorEnvSchema],
  dev: [devEnvSchema],
  sim: [simEnvSchema],
  db: [dbEnvSchema],
  CLI: [cliEnvSchema],
};

/** The rows of the first `| variable | …` table under `heading`: each row's variable names, in order. */
function tableUnder(doc: string, heading: string): { rows: string[][]; cells: string[][] } {
  const lines = readFileSync(path.join(ROOT, doc), 'utf8').split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start < 0) throw new Error(`${doc} has no heading "${heading}"`);
  const level = heading.indexOf(' ');
  const next = lines.findIndex((line, i) => i > start && /^#+ /.test(line) && line.indexOf(' ') <= level);
  const section = lines.slice(start + 1, next < 0 ? undefined : next);
  const header = section.findIndex((line) => /^\|\s*variable\s*\|/.test(line));
  if (header < 0) throw new Error(`${doc}, "${heading}": no table whose first column is "variable"`);
  const cells: string[][] = [];
  for (const line of section.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    cells.push(splitRow(line));
  }
  const rows = cells.map((row) =>
    [...row[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).filter((name) => VARIABLE.test(name)),
  );
  return { rows, cells };
}

/** A markdown table row's cells, `\|` inside a cell kept. */
const splitRow = (line: string): string[] =>
  line
    .slice(1, line.lastIndexOf('|'))
    .split(/(?<!\\)\|/)
    .map((cell) => cell.trim());

describe('environment tables', () => {
  describe.each(PROCESSES)('$name', (proc) => {
    const keys = Object.keys(proc.schema.shape).sort();
    // Read in each test, so a missing heading or table fails that process's tests, naming the file.
    const table = () => tableUnder(proc.doc, proc.heading);

    it('documents every variable its schema reads', () => {
      const documented = table().rows.flat();
      const missing = keys.filter((key) => !documented.includes(key));
      expect(missing.map((key) => `${proc.doc} (${proc.heading}) has no row for ${key} (${proc.schemaFile})`)).toEqual(
        [],
      );
    });

    it('documents only variables its schema reads', () => {
      const documented = table().rows.flat();
      const stale = documented.filter((name) => !keys.includes(name));
      expect(
        stale.map((name) => `${proc.doc} (${proc.heading}) documents ${name}, which ${proc.schemaFile} does not read`),
      ).toEqual([]);
    });

    it('names each variable once, every row at least one', () => {
      const { rows } = table();
      const documented = rows.flat();
      const twice = documented.filter((name, i) => documented.indexOf(name) !== i);
      expect(twice.map((name) => `${proc.doc} (${proc.heading}) has ${name} twice`)).toEqual([]);
      expect(rows.filter((names) => names.length === 0)).toEqual([]);
    });
  });

  it('the overview in README.md names only variables the processes in its "used by" column read', () => {
    const { rows, cells } = tableUnder('README.md', '## Environment variables');
    const wrong: string[] = [];
    rows.forEach((names, i) => {
      const users = cells[i]![1]!.split(',').map((user) => user.trim());
      for (const user of users) {
        if (user === 'tests' || user === 'all') continue;
        const schemas = BY_USER[user];
        if (!schemas) {
          wrong.push(`README.md overview: ${names.join(', ')} is used by "${user}", which is no known process`);
          continue;
        }
        for (const name of names) {
          if (!schemas.some((schema) => name in schema.shape)) {
            wrong.push(`README.md overview: ${name} says "${user}" reads it, and ${user}'s schema has no such key`);
          }
        }
      }
    });
    expect(wrong).toEqual([]);
  });
});
