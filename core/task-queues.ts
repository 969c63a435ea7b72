/**
 * Haru's two task queues (docs/architecture.md §4.1). Operations (promotions, demotions, provisioning,
 * teardown) run on the configured queue (`HARU_TASK_QUEUE`); the fleet monitors and their watches run on a
 * queue of their own beside it, so an operation's workflow and activity tasks never wait in line behind a
 * hundred monitors' tasks, and a worker's monitoring and operation capacity are sized apart. A worker polls
 * both unless HARU_WORKER_QUEUES names one (the tiers as processes of their own); every start names its
 * queue through these two functions.
 */

const MONITOR_SUFFIX = '-monitors';

/** The queue of the fleet monitors beside the operations queue `base`: `haru` → `haru-monitors`. */
export const monitorTaskQueue = (base: string): string => `${base}${MONITOR_SUFFIX}`;

/**
 * The operations queue beside a monitor's queue, where the monitor starts its children. A monitor started
 * before the queues were split runs on the operations queue itself and keeps its children there.
 */
export const operationsTaskQueueOf = (monitorQueue: string): string =>
  monitorQueue.endsWith(MONITOR_SUFFIX) ? monitorQueue.slice(0, -MONITOR_SUFFIX.length) : monitorQueue;

/**
 * The queue only one worker process polls, beside the monitors' queue (`haru-monitors/<worker id>`): a watch
 * shard another worker hands on is sent there (docs/architecture.md §4.5).
 */
export const workerOwnQueue = (base: string, workerId: string): string => `${monitorTaskQueue(base)}/${workerId}`;

/** Whether `queue` is one worker's own queue (`workerOwnQueue`), not a deployment's. */
export const isWorkerOwnQueue = (queue: string): boolean => queue.includes(`${MONITOR_SUFFIX}/`);

/** The queues one worker process serves (HARU_WORKER_QUEUES): both (the default), or one of the two tiers alone. */
export const WORKER_QUEUES = ['all', 'operations', 'monitors'] as const;
export type WorkerQueues = (typeof WORKER_QUEUES)[number];
