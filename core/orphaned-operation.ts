import type { Operation } from '../schemas/entities';

/** How a closed workflow left its still in-flight operation row, and how the reconciler ends it. */
export type OrphanEnding =
  { to: 'succeeded'; message: string } | { to: 'failed'; code: 'workflow_ended'; message: string };

/**
 * How to end an operation whose workflow has closed (`workflowStatus`: FAILED, TERMINATED, TIMED_OUT, ...)
 * while the row is still pending or running. An operation that committed routing succeeded in what
 * matters (only the old active's demotion was lost); any other is failed. Null when the row is no longer
 * in flight. Pure.
 */
export function orphanEnding(op: Operation, workflowStatus: string): OrphanEnding | null {
  if (op.state !== 'pending' && op.state !== 'running') return null;
  const why = `workflow ${op.workflowId} ended ${workflowStatus} with the operation ${op.state}`;
  if (op.state === 'running' && op.routingCommitted) {
    return { to: 'succeeded', message: `${why} after routing committed: ended as succeeded` };
  }
  return { to: 'failed', code: 'workflow_ended', message: `${why}${op.step ? ` in ${op.step}` : ''}: ended as failed` };
}
