/**
 * Runs once before every test file: starts one Temporal dev server for the whole run (STACK.md: the
 * testing library's own 5 s start budget is too tight on 2 cores). Tests read TEMPORAL_TEST_ADDRESS.
 * When TEMPORAL_TEST_ADDRESS is already set, that server is used and nothing is started.
 * Other one-time preparations (workflow bundle, template database) are added in test/support/prepare.ts.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTemporalDevServer } from '../cli/temporal-dev-server';
import { freePort } from './support/ports';
import { prepareOnce } from './support/prepare';

export default async function globalSetup(): Promise<void> {
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'haru-test-'));
  process.env.HARU_TEST_RUN_DIR = runDir;
  if (!process.env.TEMPORAL_TEST_ADDRESS) {
    const server = await startTemporalDevServer({
      port: await freePort(),
      headless: true,
      startTimeoutMs: 90_000,
      cli: process.env.TEMPORAL_CLI,
    });
    process.env.TEMPORAL_TEST_ADDRESS = server.address;
    (globalThis as { __haruTemporal?: typeof server }).__haruTemporal = server;
  }
  await prepareOnce(runDir);
}
