import type { Command } from 'commander';
import { createDatabase, type HaruDatabase } from '../../db/client';
import { type DbConfig, dbConfigFromEnv, dbEnvSchema, describeDatabase } from '../../db/config';
import { applyLayout, LayoutApplyRefusedError, type LayoutApplyReport, validateLayout } from '../../db/layout-apply';
import type { LayoutValidation } from '../../db/layout/validate';
import { migrate } from '../../db/migrate';
import { ConfigError, parseEnv } from '../../schemas/env';
import { formatProblems } from '../../schemas/issues';
import { isLegacyLayout } from '../../schemas/legacy-layout';
import { readLayoutFile } from '../layout-file';
import { type OutputOptions, renderData } from '../output';
import { EXIT } from '../exit-codes';

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

// The CLI is an entry point: this is where the environment is read (and validated) for `haru db`.
const loadConfig = (): DbConfig => dbConfigFromEnv(parseEnv(dbEnvSchema, process.env, 'database'), process.cwd());

async function withDatabase<T>(config: DbConfig, fn: (database: HaruDatabase) => Promise<T>): Promise<T> {
  const database = await createDatabase(config);
  try {
    return await fn(database);
  } finally {
    await database.close();
  }
}

const legacyLayoutMessage = (file: string) =>
  "a layout of the original project's format (the fleet's slug at the top, no fleet block): convert it with " +
  `\`haru layout convert ${file} -o <new file>\` and seed that (docs/migration.md)`;

function printReport(report: LayoutApplyReport): void {
  const counts = (['created', 'updated', 'pruned', 'unchanged', 'left'] as const).map(
    (k) => `${report[k].length} ${k}`,
  );
  out(`fleet ${report.fleetSlug} (${report.fleetId}): ${counts.join(', ')}`);
  for (const action of ['created', 'updated', 'pruned', 'left'] as const) {
    for (const ref of report[action]) out(`  ${action.padEnd(8)} ${ref}`);
  }
  if (report.left.length) out('  (left: not in the layout; --prune removes them)');
  for (const note of report.notes) out(`  note: ${note}`);
}

async function seed(opts: OutputOptions & { config: string; prune?: boolean }): Promise<void> {
  const config = loadConfig();
  const input = await readLayoutFile(opts.config);
  // Validate the whole file before touching the database: a bad layout opens no connection at all. One of the
  // original project's format would fail on every field: it is told how to convert it instead.
  const validation: LayoutValidation = isLegacyLayout(input)
    ? { ok: false, problems: [{ path: '$', message: legacyLayoutMessage(opts.config) }] }
    : validateLayout(input);
  if (!validation.ok) {
    if (opts.json) {
      out(renderData({ ok: false, problems: validation.problems }, opts));
      process.exitCode = EXIT.badInput;
      return;
    }
    throw new ConfigError(`invalid fleet layout ${opts.config}:\n${formatProblems(validation.problems)}`);
  }
  const report = await withDatabase(config, async (database) => {
    await migrate(database);
    try {
      return await applyLayout(database, validation.layout, { prune: opts.prune ?? false });
    } catch (err) {
      if (!(err instanceof LayoutApplyRefusedError)) throw err;
      if (!opts.json) throw new ConfigError(err.message);
      return err;
    }
  });
  if (report instanceof LayoutApplyRefusedError) {
    // --json promises JSON on stdout whatever happens: a refusal is `ok: false` with its reasons.
    out(renderData({ ok: false, refused: report.reasons }, opts));
    process.exitCode = EXIT.badInput;
    return;
  }
  if (opts.json) out(renderData({ ok: true, ...report }, opts));
  else printReport(report);
}

/** `haru db migrate` and `haru db seed --config FILE [--prune] [--json]` (DATABASE_URL, HARU_STATE_DIR). */
export function register(program: Command): void {
  const db = program
    .command('db')
    .description('the state store: DATABASE_URL, or the embedded database in $HARU_STATE_DIR/pgdata when unset');
  db.command('migrate')
    .description('apply pending migrations (idempotent)')
    .action(async () => {
      const config = loadConfig();
      await withDatabase(config, migrate);
      out(`migrations applied to ${describeDatabase(config)}`);
    });
  db.command('seed')
    .description('apply a fleet layout: create what is missing, update what changed (applies migrations first)')
    .requiredOption('--config <file>', 'fleet layout file (JSON, or YAML by extension)')
    .option('--prune', 'delete domains and slots that are not in the layout (never the active domain)')
    .option('--json', 'print the report (or the validation problems) as JSON')
    .action(seed);
}
