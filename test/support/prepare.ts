/**
 * One-time test-run preparations, called from globalSetup after the Temporal server is up.
 * Each step sets an env var the test files read.
 */
export async function prepareOnce(_runDir: string): Promise<void> {
  // Filled in as layers land: the migrated template database (db/testing.ts) and the workflow bundle.
}

export async function teardownOnce(): Promise<void> {}
