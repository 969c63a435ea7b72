import type { TrainingJobDetail } from '../schemas/training-api';
import type { TrainingJob, TrainingJobHistoryEntry } from '../schemas/training-job';
import { ageOf } from './age';
import { table } from './format';

/** How a table names a domain: its slug in the fleet, else the id it has (a domain removed since). */
export type DomainName = (domainId: string) => string;

export interface TrainingFormatOptions {
  wide: boolean;
  now: Date;
  domainName: DomainName;
}

/** Where a run is or was: `west/gpu0`; null before the first start. */
function slotOf(domainId: string | null, gpuIndex: number | null, domainName: DomainName): string | null {
  return domainId === null ? null : `${domainName(domainId)}/gpu${gpuIndex ?? '?'}`;
}

/** How far the job got: its last committed checkpoint's step of its steps (`300/1000`, `0/1000` before one). */
export const progressOf = (job: TrainingJob): string => `${job.checkpoint?.step ?? 0}/${job.steps}`;

/** A job in one line: what it trains into what, and its state (submit and cancel print it). */
export const jobLine = (job: TrainingJob): string =>
  `training job ${job.id}: ${job.template} on ${job.baseModel} → ${job.adapterName}, ${job.state}`;

/**
 * `haru training list` as a table: AGE, the job, what it trains, its state, progress and slot; `wide` adds the
 * run generation, priority, the times, who asked and why it ended.
 */
export function formatJobs(jobs: readonly TrainingJob[], opts: TrainingFormatOptions): string {
  const headers = ['AGE', 'JOB', 'TEMPLATE', 'BASE MODEL', 'ADAPTER', 'STATE', 'PROGRESS', 'SLOT'];
  if (opts.wide) headers.push('RUN', 'PRIORITY', 'CREATED', 'STARTED', 'FINISHED', 'REQUESTED BY', 'REASON');
  return table(
    headers,
    jobs.map((j) => {
      const row = [
        ageOf(j.createdAt, opts.now),
        j.id,
        j.template,
        j.baseModel,
        j.adapterName,
        j.state,
        progressOf(j),
        // A job holds its slot only while running; the last one stays recorded after.
        j.state === 'running' ? slotOf(j.domainId, j.gpuIndex, opts.domainName) : null,
      ];
      if (!opts.wide) return row;
      return [...row, j.runGeneration, j.priority, j.createdAt, j.startedAt, j.finishedAt, j.requestedBy, j.reason];
    }),
  );
}

const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** What one history line adds to its transition: where a run started, a checkpoint, why it ended, who asked. */
export function historyDetail(entry: TrainingJobHistoryEntry, domainName: DomainName): string {
  const { generation: _shown, requestedBy, domainId, gpuIndex, step, path, reason, ...rest } = entry.data;
  const parts: string[] = [];
  if (typeof requestedBy === 'string') parts.push(`by ${requestedBy}`);
  if (typeof domainId === 'string') {
    const slot = slotOf(domainId, typeof gpuIndex === 'number' ? gpuIndex : null, domainName);
    parts.push(entry.type === 'start' ? `on ${slot}` : `was on ${slot}`);
  }
  if (step !== undefined) parts.push(`step ${str(step)}${path !== undefined ? ` at ${str(path)}` : ''}`);
  if (reason !== undefined) parts.push(str(reason));
  for (const [k, v] of Object.entries(rest)) parts.push(`${k}=${str(v)}`);
  return parts.join(', ');
}

/**
 * A job's history (`haru training logs`, and below `show`): AGE, the event, the state move, the run generation
 * and what it adds; `wide` puts its time and cursor first.
 */
export function formatJobHistory(entries: readonly TrainingJobHistoryEntry[], opts: TrainingFormatOptions): string {
  const headers = ['AGE', 'EVENT', 'STATE', 'RUN', 'DETAIL'];
  return table(
    opts.wide ? ['TIME', 'CURSOR', ...headers] : headers,
    entries.map((e) => {
      const row = [
        ageOf(e.createdAt, opts.now),
        e.type,
        e.fromState === null || e.fromState === e.toState ? e.toState : `${e.fromState} → ${e.toState}`,
        e.runGeneration,
        historyDetail(e, opts.domainName) || null,
      ];
      return opts.wide ? [e.createdAt, `#${e.id}`, ...row] : row;
    }),
  );
}

const yesNo = (b: boolean) => (b ? 'yes' : 'no');
const atAndAge = (iso: string | null, now: Date) => (iso ? `${iso} (${ageOf(iso, now)} ago)` : '-');

/** `haru training show`: the job as a human reads it, then its history. */
export function formatJobDetail(job: TrainingJobDetail, opts: TrainingFormatOptions): string {
  const params = Object.entries(job.params)
    .map(([k, v]) => `${k}=${str(v)}`)
    .join(' ');
  const checkpoint = job.checkpoint
    ? `step ${job.checkpoint.step} at ${job.checkpoint.path} (run ${job.checkpoint.generation})`
    : 'none';
  const lines = [
    `training job ${job.id} (fleet ${job.fleetId})`,
    `  state: ${job.state}${job.reason ? ` (${job.reason})` : ''}   run: ${job.runGeneration}   slot: ${slotOf(job.domainId, job.gpuIndex, opts.domainName) ?? '-'}`,
    `  template: ${job.template}   base model: ${job.baseModel}   adapter: ${job.adapterName}   publish on success: ${yesNo(job.publishOnSuccess)}`,
    `  dataset: ${job.dataset}`,
    `  steps: ${job.steps}   checkpoint: ${checkpoint}   priority: ${job.priority}`,
    `  params: ${params || '-'}`,
    `  requested by: ${job.requestedBy}   created: ${atAndAge(job.createdAt, opts.now)}`,
    `  started: ${atAndAge(job.startedAt, opts.now)}   finished: ${atAndAge(job.finishedAt, opts.now)}`,
  ];
  if (job.preemptedAtStep !== null) lines.push(`  preempted at step ${job.preemptedAtStep}, waiting for a slot`);
  lines.push('', formatJobHistory(job.history, opts));
  if (job.nextCursor !== null) lines.push(`… more in \`haru training logs <fleet> ${job.id}\``);
  return lines.join('\n');
}
