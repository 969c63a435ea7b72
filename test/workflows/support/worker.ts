import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { type NativeConnection, Worker } from '@temporalio/worker';
import type { Store } from '../../../db/store';
import { createHaruWorker, type HaruWorkerOptions } from '../../../workers/worker';
import { workflowBundle } from './bundle';

/**
 * A Haru worker running in this process on `taskQueue` (fast polls and settle); `stop` drains it. `extra`
 * adds options such as the supervisor token or a `sky` CLI.
 */
export async function startTestWorker(
  connection: NativeConnection,
  store: Store,
  taskQueue: string,
  extra: Partial<HaruWorkerOptions> = {},
) {
  const worker = await createHaruWorker({
    connection,
    namespace: 'default',
    taskQueue,
    store,
    workflowBundle: workflowBundle(),
    pollIntervalMs: 100,
    trainingSettleMs: 300,
    ...extra,
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}

export const HISTORIES_DIR = path.join(__dirname, '..', 'histories');
const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
/** The repository path recorded fixtures show in stack traces. */
const RECORDED_REPO_ROOT = '/srv/haru';

/**
 * Replays a finished workflow's real history with the current workflow code (a changed command sequence
 * throws), and rewrites the committed fixture `histories/<name>.json` when HARU_RECORD_HISTORIES=1.
 */
export async function replayAndRecord(client: Client, handle: WorkflowHandle, name: string): Promise<void> {
  const history = await client.workflow.getHandle(handle.workflowId).fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: workflowBundle() }, history, handle.workflowId);
  if (process.env.HARU_RECORD_HISTORIES === '1') {
    // Stack traces name this checkout's path: record a neutral one, so the fixture reads the same anywhere.
    const json = historyToJSON(history).split(REPO_ROOT).join(RECORDED_REPO_ROOT);
    writeFileSync(path.join(HISTORIES_DIR, `${name}.json`), `${json}\n`);
  }
}
