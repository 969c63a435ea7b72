import type { Operation } from '../schemas/entities';

/**
 * The failed operation an operator must still see: the newest failed one that no later operation
 * succeeded after (`operations` newest first; cancelled and in-flight ones neither show nor clear it).
 * `haru fleet status` and `/ui` both show it. Pure.
 */
export function lastFailedOperation(operations: readonly Operation[]): Operation | null {
  for (const op of operations) {
    if (op.state === 'succeeded') return null;
    if (op.state === 'failed') return op;
  }
  return null;
}
