import { type Client, type Connection, WorkflowNotFoundError } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { hasCause } from '../lib/error-cause';
import { type OperationProgress, operationProgressSchema } from '../schemas/api';
import type { Operation } from '../schemas/entities';
import { HaruError } from '../schemas/errors';
import { type FleetHealth, fleetHealthSchema } from '../schemas/health';
import { monitorTaskQueue } from '../core/task-queues';
import { monitorWorkflowId } from '../core/workflow-ids';
import { abortSignal, checkNowSignal, healthQuery, progressQuery } from '../workflows/definitions';
import { monitorStart, operationStart, type StartSlugs } from '../workflows/start-options';

/**
 * What the API asks of Temporal. Every method is bounded by a deadline; an unreachable or timed-out
 * server throws HaruError `orchestrator_unavailable` (503). Implemented by `createTemporalOrchestrator`.
 */
export interface Orchestrator {
  /**
   * Starts the operation's workflow (id = operation.workflowId, workflows/start-options.ts). Starting it
   * again is harmless and never runs it twice: `already_started` while it runs and after it closed.
   */
  startOperation(operation: Operation, slugs?: StartSlugs): Promise<'started' | 'already_started'>;
  /** Sends `checkNow` to the fleet monitor, starting the monitor (tagged with `fleetSlug`) if none runs. */
  checkNow(fleetId: string, fleetSlug?: string): Promise<void>;
  /** The monitor's `health` query; null when it does not answer within the deadline (or has not polled yet). */
  monitorHealth(fleetId: string): Promise<FleetHealth | null>;
  /** The workflow's `progress` query; null when the workflow does not exist or does not answer in time. */
  progress(operation: Operation): Promise<OperationProgress | null>;
  /** Signals `abort`; `not_found` when the workflow was never started. */
  abort(operation: Operation, reason: string): Promise<'signalled' | 'not_found'>;
  /** The status of a workflow as Temporal describes it (`RUNNING`, `FAILED`, ...); null when it does not exist. */
  workflowStatus(workflowId: string): Promise<string | null>;
  /** Throws `orchestrator_unavailable` when the server does not answer a health check. */
  ping(): Promise<void>;
  /** Resolves once every call in flight has settled (before closing the connection). */
  drain(): Promise<void>;
}

export interface TemporalOrchestratorOptions {
  /** The connection the client was built on (deadlines and health checks go through it). */
  connection: Connection;
  client: Client;
  /** The operations' queue; a monitor it starts goes to the monitors' queue beside it (core/task-queues.ts). */
  taskQueue: string;
  /** Deadline for one call, in ms. */
  timeoutMs: number;
  /** Deadline for a query, in ms; a query waits for a worker, so it is kept shorter. */
  queryTimeoutMs?: number;
  now?: () => Date;
}

// gRPC status codes meaning "no answer": CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE.
const TRANSPORT_CODES = new Set([1, 4, 14]);

/** True when `err` (or a cause) is a gRPC transport failure rather than an answer from the server. */
export const isOrchestratorUnreachable = (err: unknown): boolean =>
  hasCause(
    err,
    (e) =>
      (typeof e.code === 'number' && TRANSPORT_CODES.has(e.code)) ||
      (e instanceof Error && /failed to connect|deadline exceeded/i.test(e.message)),
  );

function unavailable(err: unknown): HaruError {
  const why = err instanceof Error ? err.message : String(err);
  return new HaruError('orchestrator_unavailable', `Temporal is unreachable: ${why}`);
}

/** The Orchestrator over a Temporal client. */
export function createTemporalOrchestrator(opts: TemporalOrchestratorOptions): Orchestrator {
  const { client, connection, taskQueue } = opts;
  const now = opts.now ?? (() => new Date());
  const inflight = new Set<Promise<unknown>>();
  const bounded = async <T>(fn: () => Promise<T>, timeoutMs = opts.timeoutMs): Promise<T> => {
    const call = connection.withDeadline(now().getTime() + timeoutMs, fn);
    inflight.add(call);
    try {
      return await call;
    } catch (err) {
      if (isOrchestratorUnreachable(err)) throw unavailable(err);
      throw err;
    } finally {
      inflight.delete(call);
    }
  };
  const queryTimeoutMs = opts.queryTimeoutMs ?? Math.min(opts.timeoutMs, 2_000);

  return {
    async startOperation(operation, slugs) {
      const { workflowType, options } = operationStart(operation, undefined, slugs);
      try {
        await bounded(() => client.workflow.start(workflowType, { ...options, taskQueue }));
        return 'started';
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
        throw err;
      }
    },

    async checkNow(fleetId, fleetSlug) {
      const { workflowType, options } = monitorStart(fleetId, fleetSlug);
      await bounded(() =>
        client.workflow.signalWithStart(workflowType, {
          ...options,
          taskQueue: monitorTaskQueue(taskQueue),
          signal: checkNowSignal,
          signalArgs: [],
        }),
      );
    },

    async monitorHealth(fleetId) {
      try {
        const raw = await bounded(
          () => client.workflow.getHandle(monitorWorkflowId(fleetId)).query(healthQuery),
          queryTimeoutMs,
        );
        const parsed = fleetHealthSchema.safeParse(raw);
        return parsed.success ? parsed.data : null;
      } catch {
        // The health is an extra on top of the signal already sent: no answer in time is not an error.
        return null;
      }
    },

    async progress(operation) {
      try {
        const raw = await bounded(
          () => client.workflow.getHandle(operation.workflowId).query(progressQuery),
          queryTimeoutMs,
        );
        const parsed = operationProgressSchema.safeParse(raw);
        return parsed.success ? parsed.data : null;
      } catch {
        // Progress is a live extra on top of the stored operation: no answer is not an error.
        return null;
      }
    },

    async abort(operation, reason) {
      try {
        await bounded(() => client.workflow.getHandle(operation.workflowId).signal(abortSignal, { reason }));
        return 'signalled';
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return 'not_found';
        throw err;
      }
    },

    async workflowStatus(workflowId) {
      try {
        return (await bounded(() => client.workflow.getHandle(workflowId).describe())).status.name;
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) return null;
        throw err;
      }
    },

    async ping() {
      await bounded(() => connection.healthService.check({}));
    },

    async drain() {
      await Promise.allSettled([...inflight]);
    },
  };
}
