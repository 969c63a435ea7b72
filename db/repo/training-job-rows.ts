import {
  type TrainingJob,
  type TrainingJobHistoryEntry,
  trainingJobHistoryEntrySchema,
  trainingJobSchema,
} from '../../schemas/training-job';
import type { TrainingJobEventRow, TrainingJobRow } from '../schema';

/** Training job rows in and out of the table; rows leave the db layer only as parsed objects, as in mappers.ts. */

const iso = (d: Date | string): string => (d instanceof Date ? d : new Date(d)).toISOString();
const isoOrNull = (d: Date | string | null): string | null => (d === null ? null : iso(d));

export const toTrainingJob = (row: TrainingJobRow): TrainingJob =>
  trainingJobSchema.parse({
    id: row.id,
    fleetId: row.fleetId,
    template: row.template,
    baseModel: row.baseModel,
    adapterName: row.adapterName,
    dataset: row.dataset,
    steps: row.steps,
    params: row.params,
    priority: row.priority,
    publishOnSuccess: row.publishOnSuccess,
    state: row.state,
    runGeneration: row.runGeneration,
    domainId: row.domainId,
    gpuIndex: row.gpuIndex,
    preemptedAtStep: row.preemptedAtStep,
    checkpoint:
      row.checkpointStep === null
        ? null
        : { step: row.checkpointStep, path: row.checkpointPath, generation: row.checkpointGeneration },
    reason: row.reason,
    requestedBy: row.requestedBy,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
    startedAt: isoOrNull(row.startedAt),
    finishedAt: isoOrNull(row.finishedAt),
  });

export const toTrainingJobHistoryEntry = (row: TrainingJobEventRow): TrainingJobHistoryEntry =>
  trainingJobHistoryEntrySchema.parse({
    id: Number(row.id),
    jobId: row.jobId,
    type: row.type,
    fromState: row.fromState,
    toState: row.toState,
    runGeneration: row.runGeneration,
    data: row.data,
    createdAt: iso(row.createdAt),
  });
