import { getTableColumns, sql, type SQL } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import type { TrainingJob, TrainingJobSpec } from '../../schemas/training-job';
import { type TrainingJobEventRow, trainingJobEvents, type TrainingJobRow, trainingJobs } from '../schema';
import { timestampParam } from './support';

/**
 * The two writes of training jobs, each one statement that changes the job and appends its history line
 * together: no transaction is held open (docs/architecture.md §3.2, §3.6). Each is guarded by what the
 * decision before it read, and writes nothing when that changed since; the caller then reads and decides again.
 */

/** A row as `row_to_json` gives it (column names, timestamps as text) in the shape drizzle selects it. */
export function fromJsonRow<T>(table: PgTable, json: unknown): T {
  const record = (typeof json === 'string' ? JSON.parse(json) : json) as Record<string, unknown>;
  const row: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(table))) row[key] = record[column.name];
  return row as T;
}

export interface JobWritten {
  job: TrainingJobRow;
  entry: TrainingJobEventRow;
}

/** The result row of either statement: the job's new row and its history line. */
export const writtenRow = (row: { job: unknown; entry: unknown }): JobWritten => ({
  job: fromJsonRow<TrainingJobRow>(trainingJobs, row.job),
  entry: fromJsonRow<TrainingJobEventRow>(trainingJobEvents, row.entry),
});

const historyLine = (type: string, fromState: SQL, data: Record<string, unknown>, at: Date) => sql`
  insert into ${trainingJobEvents} (job_id, type, from_state, to_state, run_generation, data, created_at)
  select id, ${type}::text, ${fromState}, state, run_generation, ${JSON.stringify(data)}::jsonb, ${timestampParam(at)}
  from written
  returning *`;

/**
 * Inserts a queued job and its `submitted` line, only while the fleet's templates are still those the job was
 * checked against (a layout apply in between makes it insert nothing).
 */
export function insertJob(input: {
  fleetId: string;
  spec: TrainingJobSpec;
  /** The fleet's templates exactly as read (not as parsed: a default the schema adds would never match). */
  storedTemplates: unknown;
  requestedBy: string;
  at: Date;
}): SQL {
  const { fleetId, spec, requestedBy, at } = input;
  const ts = timestampParam(at);
  return sql`
    with written as (
      insert into ${trainingJobs} (fleet_id, template, base_model, adapter_name, dataset, steps, params, priority,
        publish_on_success, requested_by, created_at, updated_at)
      select id, ${spec.template}::text, ${spec.baseModel}::text, ${spec.adapterName}::text, ${spec.dataset}::text,
        ${spec.steps}::integer, ${JSON.stringify(spec.params)}::jsonb, ${spec.priority}::integer,
        ${spec.publishOnSuccess}::boolean, ${requestedBy}::text, ${ts}, ${ts}
      from fleets
      where id = ${fleetId}::uuid and training_templates = ${JSON.stringify(input.storedTemplates)}::jsonb
      returning *
    ), line as (${historyLine('submitted', sql`null`, { requestedBy }, at)})
    select row_to_json(written) as job, row_to_json(line) as entry from written, line`;
}

/**
 * Writes the job as the state machine left it, and the event's line, only if the row is still the version
 * the decision read (`xmin`: every committed row version has its own).
 */
export function moveJob(input: {
  before: TrainingJob;
  version: string;
  after: TrainingJob;
  type: string;
  data: Record<string, unknown>;
  at: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}): SQL {
  const { after, at } = input;
  const orNull = (value: Date | null) => (value ? timestampParam(value) : sql`null`);
  return sql`
    with written as (
      update ${trainingJobs} set
        state = ${after.state}::training_job_state,
        run_generation = ${after.runGeneration}::integer,
        domain_id = ${after.domainId}::uuid,
        gpu_index = ${after.gpuIndex}::integer,
        preempted_at_step = ${after.preemptedAtStep}::integer,
        checkpoint_step = ${after.checkpoint?.step ?? null}::integer,
        checkpoint_path = ${after.checkpoint?.path ?? null}::text,
        checkpoint_generation = ${after.checkpoint?.generation ?? null}::integer,
        reason = ${after.reason}::text,
        updated_at = ${timestampParam(at)},
        started_at = ${orNull(input.startedAt)},
        finished_at = ${orNull(input.finishedAt)}
      where id = ${input.before.id}::uuid and xmin::text = ${input.version}::text
      returning *
    ), line as (${historyLine(input.type, sql`${input.before.state}::training_job_state`, input.data, at)})
    select row_to_json(written) as job, row_to_json(line) as entry from written, line`;
}
