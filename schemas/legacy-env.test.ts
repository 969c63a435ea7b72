import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { z } from 'zod';
import { apiConfigSchema, loadApiConfig } from '../api/config';
import { dbEnvSchema } from '../db/config';
import { loadSupervisorEnv, supervisorEnvSchema } from '../supervisor/config';
import { loadWorkerConfig, workerConfigSchema } from '../workers/config';
import { ConfigError, parseEnv } from './env';
import { type HaruProcess, LEGACY_ENV, refusedLegacyVariables } from './legacy-env';

const SCHEMAS: Record<HaruProcess, z.ZodObject> = {
  api: apiConfigSchema,
  worker: workerConfigSchema,
  db: dbEnvSchema,
  supervisor: supervisorEnvSchema,
};

/** Each process's loader, as it starts: they all go through parseEnv (schemas/env.ts). */
const LOADERS: [string, (env: NodeJS.ProcessEnv) => unknown][] = [
  ['api', loadApiConfig],
  ['worker', loadWorkerConfig],
  ['supervisor', (env) => loadSupervisorEnv({ HARU_SUPERVISOR_CONFIG: '{}', ...env })],
  ['db', (env) => parseEnv(dbEnvSchema, env, 'database')],
];

const kept = LEGACY_ENV.flatMap((v) => ('kept' in v ? [v] : []));
const refused = LEGACY_ENV.flatMap((v) => ('replacement' in v ? [v] : []));

/** The message a loader throws for `env`, or 'started' when it accepts it. */
function startWith(load: (env: NodeJS.ProcessEnv) => unknown, env: NodeJS.ProcessEnv): string {
  try {
    load(env);
    return 'started';
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
}

describe("the original project's environment variables", () => {
  it.each(kept.map((v) => [v.name, v] as const))(
    '%s is read as before, under its own name, by the Haru processes the table names',
    (name, v) => {
      for (const proc of v.kept) expect([proc, name in SCHEMAS[proc].shape]).toEqual([proc, true]);
      expect(refusedLegacyVariables({ [name]: '1' })).toEqual([]);
    },
  );

  describe.each(refused.map((v) => [v.name, v] as const))('%s', (name, v) => {
    it.each(LOADERS)('stops %s at start, naming what replaces it', (_proc, load) => {
      const message = startWith(load, { [name]: '5000' });
      expect(message).toContain(`\n  ${name} is not read: ${v.replacement}`);
    });

    it('is not read by any process: no env schema has it', () => {
      for (const schema of Object.values(SCHEMAS)) expect(name in schema.shape).toBe(false);
    });
  });

  it('names the new place of each refused variable', () => {
    const lines = refusedLegacyVariables({
      HARU_RECONCILE_INTERVAL_MS: '1000',
      HARU_RECONCILE_FLEETS: 'a,b',
      HARU_FLEET_LAYOUT: 'fleet.json',
    });
    expect(lines).toEqual([
      expect.stringMatching(/^HARU_FLEET_LAYOUT is not read: use `haru db seed --config <file>`/),
      expect.stringMatching(/^HARU_RECONCILE_FLEETS is not read: use policy\.autoFailover: false .*haru fleet pause/),
      expect.stringMatching(/^HARU_RECONCILE_INTERVAL_MS is not read: use policy\.heartbeatIntervalMs/),
    ]);
  });

  it('refuses every other HARU_RECONCILE_* name too, and no unrelated one', () => {
    expect(
      refusedLegacyVariables({ HARU_RECONCILE_WAIT_MS: '3000', HARU_RECONCILED: '1', HARU_TASK_QUEUE: 'q' }),
    ).toEqual([
      "HARU_RECONCILE_WAIT_MS is not read: Haru has no reconcile loop to tune (the worker's fleet monitors do its " +
        'work; POST /reconcile waits a fixed 3 s for their fresh poll)',
    ]);
  });

  it('takes a blank value for unset, as every variable', () => {
    expect(refusedLegacyVariables({ HARU_FLEET_LAYOUT: '', HARU_RECONCILE_INTERVAL_MS: '  ' })).toEqual([]);
    expect(startWith(loadApiConfig, { HARU_RECONCILE_INTERVAL_MS: '' })).toBe('started');
  });

  it("lists a refused variable beside the schema's own problems", () => {
    const message = startWith(loadApiConfig, { HARU_FLEET_LAYOUT: 'f.json', PORT: 'eighty' });
    expect(message.split('\n')).toEqual([
      'invalid API environment:',
      expect.stringMatching(/^ {2}HARU_FLEET_LAYOUT is not read: /),
      expect.stringMatching(/^ {2}PORT: /),
    ]);
  });

  it('docs/migration.md has a row for every name of the table', () => {
    const doc = readFileSync(path.join(__dirname, '..', 'docs', 'migration.md'), 'utf8');
    const rows = doc.split('\n').filter((line) => line.startsWith('| `'));
    for (const { name } of LEGACY_ENV) {
      expect([name, rows.some((row) => row.startsWith(`| \`${name}\``))]).toEqual([name, true]);
    }
  });
});
