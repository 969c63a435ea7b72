import {
  ChildWorkflowCancellationType,
  type ChildWorkflowHandle,
  type ChildWorkflowOptions,
  ParentClosePolicy,
  startChild,
  type WithWorkflowArgs,
  type Workflow,
  workflowInfo,
} from '@temporalio/workflow';
import { operationsTaskQueueOf } from '../core/task-queues';
import type { WorkflowStart } from './start-options';

/**
 * Starts a child built by start-options.ts that outlives its parent and is not cancelled with it: an
 * operation the monitor starts, a replacement step, a promotion's demotion of the old active. Throws
 * WorkflowExecutionAlreadyStartedError when the id's reuse policy refuses the start.
 *
 * A monitor's children go to the operations queue beside the monitor's own (core/task-queues.ts); any other
 * parent's (a promotion's demotion) stay on the parent's queue, as the SDK's default has it.
 */
export function startAbandonedChild<W extends Workflow>(
  start: WorkflowStart<string, Parameters<W>[0]>,
): Promise<ChildWorkflowHandle<W>> {
  const { workflowType, taskQueue } = workflowInfo();
  const options = {
    ...start.options,
    taskQueue: workflowType === 'fleetMonitorWorkflow' ? operationsTaskQueueOf(taskQueue) : taskQueue,
    parentClosePolicy: ParentClosePolicy.ABANDON,
    cancellationType: ChildWorkflowCancellationType.ABANDON,
  };
  // The builder types `args` as the workflow's one input; the SDK's conditional args type cannot see that for a generic W.
  return startChild<W>(start.workflowType, options as unknown as WithWorkflowArgs<W, ChildWorkflowOptions>);
}
