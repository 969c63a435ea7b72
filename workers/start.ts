import { type Client, WorkflowIdConflictPolicy } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Store } from '../db/store';
import type { Operation } from '../schemas/entities';
import { monitorWorkflowId, searchAttributes } from '../workflows/definitions';
import type { demotionWorkflow, fleetMonitorWorkflow, promotionWorkflow } from '../workflows';

/**
 * Starts the fleet's monitor (`haru/<fleetId>/monitor`) unless one runs (USE_EXISTING), so calling it
 * on every worker start and on fleet creation is harmless.
 */
export async function ensureMonitor(client: Client, fleetId: string, taskQueue: string): Promise<void> {
  await client.workflow.start<typeof fleetMonitorWorkflow>('fleetMonitorWorkflow', {
    workflowId: monitorWorkflowId(fleetId),
    taskQueue,
    args: [{ fleetId }],
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    typedSearchAttributes: [{ key: searchAttributes.fleet, value: fleetId }],
  });
}

/** Ensures a monitor for every fleet in the store; returns the fleet ids. */
export async function ensureMonitors(client: Client, store: Store, taskQueue: string): Promise<string[]> {
  const fleets = await store.fleets.list();
  for (const fleet of fleets) await ensureMonitor(client, fleet.id, taskQueue);
  return fleets.map((f) => f.id);
}

/**
 * Starts an operation's workflow under its business id (`operation.workflowId`). Starting it twice is
 * harmless: the second call answers `already_started`. The policy is read from the store by the workflow.
 */
export async function startOperationWorkflow(
  client: Client,
  operation: Operation,
  taskQueue: string,
): Promise<'started' | 'already_started'> {
  const common = {
    workflowId: operation.workflowId,
    taskQueue,
    typedSearchAttributes: [
      { key: searchAttributes.fleet, value: operation.fleetId },
      { key: searchAttributes.domain, value: operation.targetDomainId },
      { key: searchAttributes.operation, value: operation.kind },
    ],
    memo: { reason: operation.reason, requestedBy: operation.requestedBy },
  };
  try {
    if (operation.kind === 'promote') {
      await client.workflow.start<typeof promotionWorkflow>('promotionWorkflow', {
        ...common,
        args: [
          {
            fleetId: operation.fleetId,
            operationId: operation.id,
            targetDomainId: operation.targetDomainId,
            reason: operation.reason,
          },
        ],
      });
    } else {
      await client.workflow.start<typeof demotionWorkflow>('demotionWorkflow', {
        ...common,
        args: [{ fleetId: operation.fleetId, operationId: operation.id, domainId: operation.targetDomainId }],
      });
    }
    return 'started';
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'already_started';
    throw err;
  }
}
