import path from 'node:path';
import { ensurePythonTool } from '../../support/python-tools';

/** The schemathesis release the fuzz test runs (pinned: its generators and checks change between releases). */
export const SCHEMATHESIS_VERSION = '4.32.5';

/**
 * The `st` executable of schemathesis's project-local virtualenv (test/support/python-tools.ts), installed
 * from PyPI on first use. Throws with pip's output when Python or the package index is unavailable.
 */
export async function ensureSchemathesis(): Promise<string> {
  const venv = ensurePythonTool({ package: 'schemathesis', version: SCHEMATHESIS_VERSION });
  return path.join(venv, 'bin', 'st');
}
