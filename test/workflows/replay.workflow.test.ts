/**
 * Recorded histories of real runs (test 1's promotion, test 4's auto-failover promotion and its monitor, a
 * watch shard across checkpoints) replay with the current workflow code. They are the 1.0 baseline, recorded
 * with no patch in the code. A change to the commands a workflow issues fails here: put it behind
 * `patched('<id>')` (docs/architecture.md §4.9), or re-record deliberately with HARU_RECORD_HISTORIES=1 once
 * no execution from before the change can be running.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { workflowBundle } from './support/bundle';
import { quietRuntime } from './support/temporal';
import { HISTORIES_DIR } from './support/worker';

const fixtures = readdirSync(HISTORIES_DIR).filter((f) => f.endsWith('.json'));

beforeAll(() => quietRuntime());

it('has the recorded histories of a promotion, an auto-failover, a monitor and a watch shard', () => {
  expect(fixtures.sort()).toEqual([
    'auto-failover-promotion.json',
    'fleet-monitor.json',
    'promotion.json',
    'watch-shard.json',
  ]);
});

it.each(fixtures)('%s replays without a nondeterminism error', async (file) => {
  const history = JSON.parse(readFileSync(path.join(HISTORIES_DIR, file), 'utf8')) as unknown;
  await Worker.runReplayHistory({ workflowBundle: workflowBundle() }, history, file.replace(/\.json$/, ''));
});

it('rejects a history whose commands the code does not issue (the check has teeth)', async () => {
  const history = JSON.parse(readFileSync(path.join(HISTORIES_DIR, 'promotion.json'), 'utf8')) as {
    events: { workflowExecutionStartedEventAttributes?: { workflowType: { name: string } } }[];
  };
  history.events[0]!.workflowExecutionStartedEventAttributes!.workflowType.name = 'demotionWorkflow';
  await expect(Worker.runReplayHistory({ workflowBundle: workflowBundle() }, history, 'tampered')).rejects.toThrow(
    /nondeterminism|DeterminismViolation/i,
  );
});
