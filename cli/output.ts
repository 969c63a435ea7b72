import type * as Yaml from 'yaml';

/**
 * How a read command prints: `table` (default), `wide` (the table with more columns), or the data itself as
 * `json` or `yaml` (`--json` is short for `-o json`). `cli/arguments.ts` adds `-o` to every command with `--json`.
 */
export const OUTPUT_FORMATS = ['table', 'wide', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The options every read command gets: `json` is true for either data format, `output` names the format. */
export interface OutputOptions {
  json?: boolean;
  output?: OutputFormat;
}

/** The format the options ask for: `--json` alone is json, nothing is table. */
export function formatOf(opts: OutputOptions): OutputFormat {
  if (opts.output) return opts.output;
  return opts.json ? 'json' : 'table';
}

/** Whether the command prints data (json or yaml) rather than a table. */
export const isData = (opts: OutputOptions): boolean => {
  const format = formatOf(opts);
  return format === 'json' || format === 'yaml';
};

/** Whether the table gets its extra columns. */
export const isWide = (opts: OutputOptions): boolean => formatOf(opts) === 'wide';

/** `value` as the data format asked for (yaml only when asked: the package loads on use). */
export function renderData(value: unknown, opts: OutputOptions): string {
  if (formatOf(opts) !== 'yaml') return JSON.stringify(value, null, 2);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const YAML = require('yaml') as typeof Yaml;
  return YAML.stringify(value).trimEnd();
}

/**
 * One value of a stream (`events --follow`): a JSON line, or a YAML document opened by `---` so a reader can
 * split the stream.
 */
export function renderStreamItem(value: unknown, opts: OutputOptions): string {
  return formatOf(opts) === 'yaml' ? `---\n${renderData(value, opts)}` : JSON.stringify(value);
}
