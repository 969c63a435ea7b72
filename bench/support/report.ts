import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** Where benchmark JSON goes (git-ignored, the folder is kept by .gitkeep). */
export const RESULTS_DIR = path.resolve(__dirname, '..', 'results');

/** Prints rows as an aligned text table under a title. */
export function printTable(title: string, header: string[], rows: (string | number)[][]): void {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  process.stdout.write(`\n${title}\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const r of cells.slice(1)) process.stdout.write(`${line(r)}\n`);
}

/** The machine a figure was measured on, recorded with every result. */
export function machine() {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadAverage: os.loadavg(),
  };
}

/**
 * Writes `bench/results/<name>-<timestamp>.json` and `bench/results/<name>.json` (the latest) with the
 * command line, the machine and the figures. Returns the timestamped path.
 */
export function writeResult(name: string, data: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const at = new Date().toISOString();
  const body = `${JSON.stringify({ bench: name, at, command: process.argv.slice(1).join(' '), machine: machine(), ...(data as object) }, null, 2)}\n`;
  const file = path.join(RESULTS_DIR, `${name}-${at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, body);
  writeFileSync(path.join(RESULTS_DIR, `${name}.json`), body);
  return file;
}
