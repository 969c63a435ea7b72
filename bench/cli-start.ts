/**
 * `npm run bench:cli`: how long `haru --version` takes to start, the median of --runs runs (10), for the
 * compiled CLI (dist/haru.js, what `npm ci` builds), the TypeScript sources through tsx (what an edited tree
 * runs until the next build), the tree at --before (default HEAD, today's figure: pass the commit before the
 * compiled CLI, whose `haru` had no --version and is timed on `--help`), and bare `node` as the floor.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { printTable, writeResult } from './support/report';
import { fmt, median } from './support/stats';

const ROOT = path.resolve(__dirname, '..');
const { values: args } = parseArgs({
  options: { runs: { type: 'string', default: '10' }, before: { type: 'string' } },
});
const RUNS = Number(args.runs);
if (!Number.isInteger(RUNS) || RUNS < 1) throw new Error('--runs must be a positive integer');

/** Wall milliseconds of each of RUNS runs of `node ...argv` in `cwd`; a failed run is an error. */
function time(argv: string[], cwd = ROOT, okStatuses = [0]): number[] {
  const runs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = process.hrtime.bigint();
    const r = spawnSync(process.execPath, argv, { cwd, encoding: 'utf8' });
    runs.push(Number(process.hrtime.bigint() - start) / 1e6);
    if (!okStatuses.includes(r.status ?? -1)) throw new Error(`node ${argv.join(' ')}: ${r.stderr}`);
  }
  return runs;
}

/** The tree at `ref` in a temporary folder that shares this checkout's node_modules. */
function checkoutOf(ref: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-cli-before-'));
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive "${ref}" | tar -x -C "${dir}"`]);
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return dir;
}

execFileSync(process.execPath, [path.join(ROOT, 'scripts/build-cli.js')], { stdio: 'inherit' });
if (!existsSync(path.join(ROOT, 'dist/haru.js'))) throw new Error('scripts/build-cli.js built no dist/haru.js');

const rows: { name: string; runs: number[] }[] = [
  { name: 'node -e 0 (floor)', runs: time(['-e', '0']) },
  { name: 'compiled (dist/haru.js)', runs: time(['bin/haru.js', '--version']) },
  { name: 'tsx (sources)', runs: time(['-r', 'tsx/cjs', 'cli/main.ts', '--version']) },
];
if (args.before) {
  const dir = checkoutOf(args.before);
  try {
    rows.push({ name: `before (${args.before}, --help)`, runs: time(['bin/haru.js', '--help'], dir) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

printTable(
  `haru --version start time, ${RUNS} runs (ms; load average ${os.loadavg()[0]!.toFixed(1)})`,
  ['variant', 'median', 'min', 'max'],
  rows.map((r) => [r.name, fmt(median(r.runs)), fmt(Math.min(...r.runs)), fmt(Math.max(...r.runs))]),
);
const file = writeResult('cli-start', { runs: RUNS, variants: rows.map((r) => ({ ...r, medianMs: median(r.runs) })) });
process.stdout.write(`\nwritten to ${path.relative(ROOT, file)}\n`);
