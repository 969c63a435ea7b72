import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { ConfigError } from '../../schemas/env';
import { formatProblems } from '../../schemas/issues';
import type { LegacyConversion } from '../../schemas/legacy-conversion';
import { convertLegacyLayout, isLegacyLayout } from '../../schemas/legacy-layout';
import { convertLegacySupervisorConfig, isLegacySupervisorConfig } from '../../schemas/legacy-supervisor-config';
import { readLayoutFile, renderLayoutFile } from '../layout-file';

/** What the file is, from its shape: a fleet layout or a supervisor config of the original project. */
function converterFor(file: string, input: unknown): { what: string; convert: () => LegacyConversion<unknown> } {
  if (isLegacyLayout(input)) return { what: 'fleet layout', convert: () => convertLegacyLayout(input) };
  if (isLegacySupervisorConfig(input)) {
    return { what: 'supervisor config', convert: () => convertLegacySupervisorConfig(input) };
  }
  const record = typeof input === 'object' && input !== null ? (input as Record<string, unknown>) : {};
  if ('fleet' in record || 'inference' in record || 'training' in record) {
    throw new ConfigError(`${file} is already in Haru's format: nothing to convert`);
  }
  throw new ConfigError(
    `${file} is neither a fleet layout (slug, domains) nor a supervisor config (slots) of the original project's format`,
  );
}

/**
 * `haru layout convert FILE [-o OUT]`: a fleet layout or supervisor config of the original project, written in
 * Haru's format (to OUT, else stdout); every difference made goes to stderr. A file it cannot convert exits 2,
 * naming each field at fault, and nothing is written.
 */
async function convert(file: string, opts: { out?: string }): Promise<void> {
  const { what, convert: run } = converterFor(file, await readLayoutFile(file));
  const result = run();
  if (!result.ok)
    throw new ConfigError(
      `cannot convert ${file} (a ${what} of the original project's format):\n${formatProblems(result.problems)}`,
    );
  const text = renderLayoutFile(opts.out, result.document);
  if (opts.out) await writeFile(opts.out, text);
  else process.stdout.write(text);
  const target = opts.out ?? 'stdout';
  process.stderr.write(`converted the original ${what} ${file} to ${target}, with ${result.changes.length} changes:\n`);
  for (const change of result.changes) process.stderr.write(`  ${change}\n`);
}

/** `haru layout convert`: files of the project Haru grew from, in Haru's format (docs/migration.md). */
export function register(program: Command): void {
  const layout = program.command('layout').description("fleet layouts and supervisor configs: Haru's format");
  layout
    .command('convert <file>')
    .description(
      "write a fleet layout or supervisor config of the original project in Haru's format, listing every change on stderr",
    )
    .option('-o, --out <file>', 'where to write it (YAML for .yaml/.yml, else JSON); default stdout')
    .action(convert);
}
