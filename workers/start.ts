import { type Client, WorkflowNotFoundError } from '@temporalio/client';
import type { Logger } from '@temporalio/common';
import type { Store } from '../db/store';
import { endOrphanedOperation } from '../db/orphaned-operation';
import type { FleetSnapshot, Operation } from '../schemas/entities';
import { monitorTaskQueue } from '../core/task-queues';
import { monitorWorkflowId } from '../core/workflow-ids';
import { DEFAULT_WATCH_SHARDS } from '../core/watch-shard';
import { monitorStart, watchShardStart } from '../workflows/start-options';

/** Starts the fleet's monitor on the monitors' queue beside `taskQueue` unless one runs (USE_EXISTING). */
async function startMonitor(client: Client, fleetId: string, taskQueue: string, fleetSlug?: string): Promise<void> {
  const { workflowType, options } = monitorStart(fleetId, fleetSlug);
  await client.workflow.start(workflowType, { ...options, taskQueue: monitorTaskQueue(taskQueue) });
}

/**
 * Starts the watch of every shard of `shards` (core/watch-shard.ts) on the monitors' queue beside `taskQueue`
 * unless it runs (USE_EXISTING): the fleets' supervisors are polled by these. `fleetCheckpointMs` shortens
 * the monitors' routine signal (tests).
 */
export async function ensureWatchShards(
  client: Client,
  taskQueue: string,
  shards: number = DEFAULT_WATCH_SHARDS,
  opts: { fleetCheckpointMs?: number } = {},
): Promise<void> {
  for (let shard = 0; shard < shards; shard += 1) {
    const { workflowType, options } = watchShardStart(taskQueue, shard, shards, opts);
    await client.workflow.start(workflowType, { ...options, taskQueue: monitorTaskQueue(taskQueue) });
  }
}

/**
 * Starts what watches the fleet: its monitor (`haru/<fleetId>/monitor`) and the watch shards, each on the
 * monitors' queue beside the operations queue `taskQueue` unless it runs (USE_EXISTING), so calling it on
 * every worker start, on fleet creation and from `keepMonitors` is harmless. A monitor already running on the
 * operations queue (started before the queues were split) is joined there.
 */
export async function ensureMonitor(
  client: Client,
  fleetId: string,
  taskQueue: string,
  fleetSlug?: string,
  shards: number = DEFAULT_WATCH_SHARDS,
): Promise<void> {
  await startMonitor(client, fleetId, taskQueue, fleetSlug);
  await ensureWatchShards(client, taskQueue, shards);
}

/** Ensures the watch shards and a monitor for every fleet in the store; returns the fleet ids. */
export async function ensureMonitors(
  client: Client,
  store: Store,
  taskQueue: string,
  shards: number = DEFAULT_WATCH_SHARDS,
): Promise<string[]> {
  await ensureWatchShards(client, taskQueue, shards);
  const fleets = await store.fleets.list();
  for (const fleet of fleets) await startMonitor(client, fleet.id, taskQueue, fleet.slug);
  return fleets.map((f) => f.id);
}

/**
 * Ends `op` when its workflow has closed while the row is still in flight (the workflow failed, was
 * terminated or timed out): nothing else would ever end it, and it holds the fleet's in-flight slot, so
 * the monitor could never fail over again. Records an `operation.orphaned` event saying how it was ended.
 * A pending operation whose workflow was never started is left to the monitor, which starts it.
 * Returns the ending, or null when the operation is not orphaned.
 */
export async function endIfOrphaned(client: Client, store: Store, op: Operation): Promise<string | null> {
  let status: string;
  try {
    status = (await client.workflow.getHandle(op.workflowId).describe()).status.name;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
  return endOrphanedOperation(store, op, status);
}

/**
 * The workflow ids of the monitors that run now, as Temporal's visibility lists them (a monitor that just
 * started may be missing, and is started again: harmless; one that just ended may still be listed, and is
 * started at the next round).
 */
async function runningMonitorIds(client: Client): Promise<Set<string>> {
  const ids = new Set<string>();
  const query = `WorkflowType = '${monitorStart('').workflowType}' AND ExecutionStatus = 'Running'`;
  for await (const execution of client.workflow.list({ query })) ids.add(execution.workflowId);
  return ids;
}

/** A running `keepMonitors` loop; `stop` waits for the round under way. */
export interface MonitorKeeper {
  stop(): Promise<void>;
}

/**
 * The worker's supervisor loop, every `intervalMs`: every watch shard of `shards` and a monitor for every fleet
 * in the store that Temporal does not list running (a fleet seeded after the worker started, or one whose
 * monitor or shard failed, was terminated or timed out, gets one within a round or two), and every in-flight
 * operation whose workflow has closed is ended (`endIfOrphaned`). A failed round (store or Temporal down) is
 * logged and tried again at the next one. `onFleets` sees each round's fleets (the worker's metrics write a new
 * fleet's counters at 0).
 */
export function keepMonitors(opts: {
  client: Client;
  store: Store;
  taskQueue: string;
  intervalMs: number;
  logger: Logger;
  shards?: number;
  onFleets?: (fleets: readonly FleetSnapshot[]) => void;
}): MonitorKeeper {
  const { client, store, taskQueue, logger } = opts;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let round: Promise<void> = Promise.resolve();
  let isListingReported = false;
  const once = async () => {
    await ensureWatchShards(client, taskQueue, opts.shards);
    // One listing instead of a start per fleet: at a thousand fleets the starts were a sixth of a core.
    const running = await runningMonitorIds(client).catch((err: unknown) => {
      if (!isListingReported) {
        isListingReported = true;
        logger.warn('running monitors not listed: starting every fleet’s monitor each round', {
          error: (err as Error).message,
        });
      }
      return null;
    });
    const fleets = await store.fleets.list();
    opts.onFleets?.(fleets);
    for (const fleet of fleets) {
      try {
        if (!running?.has(monitorWorkflowId(fleet.id))) await startMonitor(client, fleet.id, taskQueue, fleet.slug);
        const op = fleet.inFlightOperation;
        const ended = op && (await endIfOrphaned(client, store, op));
        if (ended) logger.warn('orphaned operation ended', { fleetId: fleet.id, operationId: op.id, to: ended });
      } catch (err) {
        logger.warn('fleet not kept this round', { fleetId: fleet.id, error: (err as Error).message });
      }
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      round = once()
        .catch((err: unknown) => logger.warn('monitors not kept this round', { error: (err as Error).message }))
        .finally(schedule);
    }, opts.intervalMs);
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await round;
    },
  };
}
