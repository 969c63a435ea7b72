import { dropStaleTestDatabases, prepareTemplateDatabase } from '../../db/testing';

/**
 * One-time test-run preparations, called from globalSetup after the Temporal server is up.
 * Each step sets an env var the test files read.
 */
export async function prepareOnce(_runDir: string): Promise<void> {
  // Filled in as layers land: the migrated template database (db/testing.ts) and the workflow bundle.
  // The migrated template every test file clones (db/testing.ts); test files recreate it lazily if absent.
  await dropStaleTestDatabases();
  process.env.HARU_TEST_TEMPLATE_DB = await prepareTemplateDatabase();
}

export async function teardownOnce(): Promise<void> {}
