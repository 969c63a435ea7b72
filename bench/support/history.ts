import type { WorkflowClient } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { printTable } from './report';

/** A workflow's history as `fetchHistory` returns it. */
export type History = Awaited<ReturnType<ReturnType<WorkflowClient['getHandle']>['fetchHistory']>>;

/** Prints the promotion's Temporal history up to the commit: where the time between steps goes. */
export function printTimeline(
  history: History,
  decidedAt: number,
  title = 'promotion history (ms after the decision)',
): void {
  const names = new Map<string, string>();
  const rows: string[][] = [];
  for (const e of history.events ?? []) {
    const t = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);
    const id = String(e.eventId);
    let what = (temporal.api.enums.v1.EventType[e.eventType ?? 0] ?? String(e.eventType)).replace('EVENT_TYPE_', '');
    const scheduled = e.activityTaskScheduledEventAttributes;
    if (scheduled) names.set(id, scheduled.activityType?.name ?? '?');
    const ref =
      e.activityTaskStartedEventAttributes?.scheduledEventId ??
      e.activityTaskCompletedEventAttributes?.scheduledEventId;
    what = `${what} ${scheduled?.activityType?.name ?? (ref ? names.get(String(ref)) : '') ?? ''}`;
    rows.push([`+${t - decidedAt}`, what]);
  }
  printTable(title, ['t', 'event'], rows);
}

/** Where decision -> commit goes, from the promotion's Temporal history (ms, summed over the span). */
export interface Breakdown {
  /** Operation row inserted -> promotion workflow started (the monitor starting its child). */
  startMs: number;
  /** Workflow tasks: scheduled -> completed, each one a server round trip to the worker. */
  workflowTasksMs: number;
  workflowTasks: number;
  /** beginOperation and recordStep: scheduled -> completed. */
  bookkeepingMs: number;
  bookkeepingActivities: number;
  /** The five step activities up to the commit: scheduled -> completed (includes the simulator's delays). */
  stepActivitiesMs: number;
}

const BOOKKEEPING = new Set(['beginOperation', 'recordStep']);
const STEPS = new Set(['stopTraining', 'verifyGpuReleased', 'wakeModels', 'probeModels', 'commitRouting']);

export function historyBreakdown(history: History, decidedAt: number, committedAt: number): Breakdown {
  const at = (e: NonNullable<History['events']>[number]) =>
    Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);
  const out: Breakdown = {
    startMs: 0,
    workflowTasksMs: 0,
    workflowTasks: 0,
    bookkeepingMs: 0,
    bookkeepingActivities: 0,
    stepActivitiesMs: 0,
  };
  const scheduled = new Map<string, { at: number; name: string }>();
  let wftScheduledAt: number | null = null;
  for (const e of history.events ?? []) {
    const t = at(e);
    if (t > committedAt + 5) break;
    if (e.workflowExecutionStartedEventAttributes) out.startMs = t - decidedAt;
    if (e.workflowTaskScheduledEventAttributes) wftScheduledAt = t;
    if (e.workflowTaskCompletedEventAttributes && wftScheduledAt !== null) {
      out.workflowTasksMs += t - wftScheduledAt;
      out.workflowTasks += 1;
      wftScheduledAt = null;
    }
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), { at: t, name: s.activityType?.name ?? '' });
    const c = e.activityTaskCompletedEventAttributes;
    const from = c ? scheduled.get(String(c.scheduledEventId)) : undefined;
    if (from && BOOKKEEPING.has(from.name)) {
      out.bookkeepingMs += t - from.at;
      out.bookkeepingActivities += 1;
    }
    if (from && STEPS.has(from.name)) out.stepActivitiesMs += t - from.at;
  }
  return out;
}
