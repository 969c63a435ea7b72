import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Store } from '../db/store';
import type { Operation } from '../schemas/entities';
import { monitorStart, operationStart } from '../workflows/start-options';

/**
 * Starts the fleet's monitor (`haru/<fleetId>/monitor`) unless one runs (USE_EXISTING), so calling it
 * on every worker start and on fleet creation is harmless.
 */
export async function ensureMonitor(client: Client, fleetId: string, taskQueue: string): Promise<void> {
  const { workflowType, options } = monitorStart(fleetId);
  await client.workflow.start(workflowType, { ...options, taskQueue });
}

/** Ensures a monitor for every fleet in the store; returns the fleet ids. */
export async function ensureMonitors(client: Client, store: Store, taskQueue: string): Promise<string[]> {
  const fleets = await store.fleets.list();
  for (const fleet of fleets) await ensureMonitor(client, fleet.id, taskQueue);
  return fleets.map((f) => f.id);
}

/**
 * Starts an operation's workflow under its business id, as the API's orchestrator does. Starting it again
 * answers `already_started` and never runs it twice. The policy is read from the store by the workflow.
 */
export async function startOperationWorkflow(
  client: Client,
  operation: Operation,
  taskQueue: string,
): Promise<'started' | 'already_started'> {
  const { workflowType, options } = operationStart(operation);
  try {
    await client.workflow.start(workflowType, { ...options, taskQueue });
    return 'started';
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
    throw err;
  }
}
