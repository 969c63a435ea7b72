import { isWorkerOwnQueue, monitorTaskQueue, operationsTaskQueueOf, workerOwnQueue } from './task-queues';

describe('task queues', () => {
  it('puts the monitors beside the operations queue and finds the operations queue back from it', () => {
    expect(monitorTaskQueue('haru')).toBe('haru-monitors');
    expect(operationsTaskQueueOf(monitorTaskQueue('haru'))).toBe('haru');
    // A base that itself ends like a monitor queue still round-trips.
    expect(operationsTaskQueueOf(monitorTaskQueue('x-monitors'))).toBe('x-monitors');
  });

  it('keeps the children of a monitor that runs on the operations queue (started before the split) there', () => {
    expect(operationsTaskQueueOf('haru')).toBe('haru');
  });

  it('names a worker’s own queue beside the monitors’ queue, told apart from every deployment queue', () => {
    const own = workerOwnQueue('haru', 'host:12:ab');
    expect(own).toBe('haru-monitors/host:12:ab');
    expect(isWorkerOwnQueue(own)).toBe(true);
    expect(isWorkerOwnQueue(monitorTaskQueue('haru'))).toBe(false);
    expect(isWorkerOwnQueue('haru')).toBe(false);
  });
});
