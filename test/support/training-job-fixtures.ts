/**
 * Training jobs as the API answers them, for `haru training` tests: builders with fixed ids and overrides,
 * parsed with the API's own schemas so a fixture cannot drift from the answer's shape.
 */
import { ID } from '../../core/fleet-fixtures';
import {
  type TrainingJob,
  type TrainingJobHistoryEntry,
  trainingJobHistoryEntrySchema,
  trainingJobSchema,
} from '../../schemas/training-job';

export const JOB_ID = '00000000-0000-4000-8000-0000000000c1';
export const T0 = '2030-01-01T00:00:00.000Z';

/** A queued `lora-sft` job of fleet `prod` (core/fleet-fixtures' ids), created at T0. */
export function trainingJobFixture(overrides: Partial<TrainingJob> = {}): TrainingJob {
  return trainingJobSchema.parse({
    id: JOB_ID,
    fleetId: ID.fleet,
    template: 'lora-sft',
    baseModel: 'llama',
    adapterName: 'support-bot',
    dataset: 's3://datasets/support.jsonl',
    steps: 1000,
    params: { rank: 16 },
    priority: 0,
    publishOnSuccess: false,
    state: 'queued',
    runGeneration: 0,
    domainId: null,
    gpuIndex: null,
    preemptedAtStep: null,
    checkpoint: null,
    reason: null,
    requestedBy: 'api:oncall',
    createdAt: T0,
    updatedAt: T0,
    startedAt: null,
    finishedAt: null,
    ...overrides,
  });
}

/** One history line of the fixture job. */
export function historyFixture(
  id: number,
  type: TrainingJobHistoryEntry['type'],
  overrides: Partial<TrainingJobHistoryEntry> = {},
): TrainingJobHistoryEntry {
  return trainingJobHistoryEntrySchema.parse({
    id,
    jobId: JOB_ID,
    type,
    fromState: null,
    toState: 'queued',
    runGeneration: 0,
    data: {},
    createdAt: T0,
    ...overrides,
  });
}

/** The life of a job that was started on `b`, checkpointed and cancelled, each a minute after the last. */
export function cancelledRunHistory(): TrainingJobHistoryEntry[] {
  const at = (minutes: number) => new Date(Date.parse(T0) + minutes * 60_000).toISOString();
  return [
    historyFixture(1, 'submitted', { data: { requestedBy: 'api:oncall' } }),
    historyFixture(2, 'start', {
      fromState: 'queued',
      toState: 'running',
      runGeneration: 1,
      data: { domainId: ID.b, gpuIndex: 0 },
      createdAt: at(1),
    }),
    historyFixture(3, 'checkpointCommitted', {
      fromState: 'running',
      toState: 'running',
      runGeneration: 1,
      data: { generation: 1, step: 300, path: '/ckpt/step-300' },
      createdAt: at(2),
    }),
    historyFixture(4, 'cancel', {
      fromState: 'running',
      toState: 'cancelled',
      runGeneration: 1,
      data: { reason: 'wrong dataset', domainId: ID.b, gpuIndex: 0 },
      createdAt: at(3),
    }),
  ];
}
