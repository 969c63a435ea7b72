/**
 * Activity slots of one worker on the operations queue by default (HARU_WORKER_MAX_ACTIVITIES): the steps of
 * promotions, demotions, provisionings and teardowns in flight, one slot each while it runs. A step mostly
 * waits on a GPU host, so a slot costs little while it waits; 500 is room for a few hundred operations at
 * once. Tasks beyond it wait in the queue, in priority order (workflows/start-options.ts), for a free slot
 * here or on another worker.
 */
export const DEFAULT_MAX_CONCURRENT_ACTIVITIES = 500;

/**
 * Activity slots of one worker on the monitors' queue by default (HARU_WORKER_MAX_MONITORS): every monitored
 * fleet holds one for as long as its watch runs (it returns only when a decision is due or at its one-minute
 * checkpoint), and its decisions and repairs take one briefly. So this is how many fleets one worker watches
 * at once; watches beyond it wait in the queue for another worker. The slots cost nothing while their
 * watches sleep; what bounds a worker is the CPU of the polls (docs/architecture.md §4.1). The SDK's own
 * default (100) would make 100 fleets the limit.
 */
export const DEFAULT_MAX_MONITORS = 2_000;

/** Default pause between two `keepMonitors` rounds (HARU_MONITOR_KEEP_INTERVAL_MS, workers/start.ts). */
export const DEFAULT_MONITOR_KEEP_INTERVAL_MS = 15_000;
