import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The schemathesis release the fuzz test runs (pinned: its generators and checks change between releases). */
export const SCHEMATHESIS_VERSION = '4.32.5';

const REPO_ROOT = path.resolve(__dirname, '../../..');

/**
 * The `st` executable of a project-local virtualenv (`.haru/venvs/schemathesis-<version>`), created with
 * `python3 -m venv` and filled from PyPI on first use. Later calls reuse it. Throws with pip's output when
 * Python or the package index is unavailable.
 */
export async function ensureSchemathesis(): Promise<string> {
  const venv = path.join(REPO_ROOT, '.haru', 'venvs', `schemathesis-${SCHEMATHESIS_VERSION}`);
  const st = path.join(venv, 'bin', 'st');
  if (existsSync(st)) return st;
  mkdirSync(path.dirname(venv), { recursive: true });
  try {
    await run('python3', ['-m', 'venv', venv], { timeout: 120_000 });
    await run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', `schemathesis==${SCHEMATHESIS_VERSION}`], {
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(
      `could not install schemathesis ${SCHEMATHESIS_VERSION} into ${venv} (needs python3 with venv and PyPI): ${e.message}\n${e.stderr ?? ''}`,
    );
  }
  if (!existsSync(st)) throw new Error(`schemathesis installed into ${venv} but ${st} is missing`);
  return st;
}
