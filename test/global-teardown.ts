import { rmSync } from 'node:fs';
import type { DevServer } from '../cli/temporal-dev-server';
import { teardownOnce } from './support/prepare';

export default async function globalTeardown(): Promise<void> {
  await teardownOnce();
  const server = (globalThis as { __haruTemporal?: DevServer }).__haruTemporal;
  await server?.stop();
  if (process.env.HARU_TEST_RUN_DIR) rmSync(process.env.HARU_TEST_RUN_DIR, { recursive: true, force: true });
}
