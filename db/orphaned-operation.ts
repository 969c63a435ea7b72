import { orphanEnding } from '../core/orphaned-operation';
import type { Operation } from '../schemas/entities';
import type { Store } from './store';

/** The store calls ending an orphan needs (the worker's store and the API's both have them). */
export interface OrphanStore {
  operations: Pick<Store['operations'], 'get' | 'succeed' | 'fail'>;
  events: Pick<Store['events'], 'append'>;
}

/**
 * Ends `op` when its workflow has closed (`workflowStatus`, as Temporal describes it) while the row is still
 * in flight, with an `operation.orphaned` event saying how. Re-reads the row first: a workflow that closed
 * normally ended its row before it closed. Returns the state it was ended in, or null when it was not
 * orphaned (or someone else ended it meanwhile). The one way the worker's keeper and `fleet repair` end it.
 */
export async function endOrphanedOperation(
  store: OrphanStore,
  op: Operation,
  workflowStatus: string,
): Promise<'succeeded' | 'failed' | null> {
  if (workflowStatus === 'RUNNING') return null;
  const current = await store.operations.get(op.id);
  const ending = current && orphanEnding(current, workflowStatus);
  if (!ending) return null;
  const ended =
    ending.to === 'succeeded'
      ? await store.operations.succeed(op.id)
      : await store.operations.fail(op.id, {
          step: current.step ?? 'workflow',
          code: ending.code,
          message: ending.message,
        });
  if (!ended) return null;
  await store.events.append({
    fleetId: op.fleetId,
    operationId: op.id,
    domainId: op.targetDomainId,
    type: 'operation.orphaned',
    message: `operation ${op.id} (${op.kind}): ${ending.message}`,
    data: { action: 'ended', to: ending.to, workflowStatus, step: current.step },
  });
  return ending.to;
}
