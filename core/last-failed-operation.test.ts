import type { Operation } from '../schemas/entities';
import { lastFailedOperation } from './last-failed-operation';

describe('lastFailedOperation', () => {
  const op = (id: string, state: Operation['state']) => ({ id, state }) as Operation;

  it('is the newest failed operation unless a later one succeeded; cancelled and in-flight ones pass', () => {
    expect(lastFailedOperation([op('c', 'running'), op('b', 'cancelled'), op('a', 'failed')])?.id).toBe('a');
    expect(lastFailedOperation([op('b', 'succeeded'), op('a', 'failed')])).toBeNull();
    expect(lastFailedOperation([op('b', 'failed'), op('a', 'succeeded')])?.id).toBe('b');
    expect(lastFailedOperation([])).toBeNull();
  });
});
