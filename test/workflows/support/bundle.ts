import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';

/** The env var naming the workflow bundle built once per test run. */
export const WORKFLOW_BUNDLE_ENV = 'HARU_TEST_WORKFLOW_BUNDLE';

const quiet = { trace() {}, debug() {}, info() {}, log() {}, warn() {}, error: (m: string) => console.error(m) };

/**
 * Bundles workflows/index.ts (the worker bundler: a forbidden import fails here) into `runDir` and
 * exports its path in HARU_TEST_WORKFLOW_BUNDLE. Workers in tests use `workflowBundle: { codePath }`.
 */
export async function buildWorkflowBundle(runDir: string): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../../../workflows'),
    logger: quiet,
  });
  const codePath = path.join(runDir, 'workflow-bundle.js');
  writeFileSync(codePath, code);
  process.env[WORKFLOW_BUNDLE_ENV] = codePath;
  return codePath;
}

/** The bundle of this run; throws when globalSetup did not build it. */
export function workflowBundle(): { codePath: string } {
  const codePath = process.env[WORKFLOW_BUNDLE_ENV];
  if (!codePath)
    throw new Error(`${WORKFLOW_BUNDLE_ENV} is not set: run the tests through jest (test/global-setup.ts builds it)`);
  return { codePath };
}
