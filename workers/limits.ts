/**
 * Activity slots of one worker by default: every monitored fleet holds one for as long as its monitor
 * watches, so this is room for about 1,900 fleets plus their operations' steps. The slots cost nothing
 * while their activities sleep; the SDK's own default (100) lets 100 fleets' monitors starve every
 * promotion step of a slot.
 */
export const DEFAULT_MAX_CONCURRENT_ACTIVITIES = 2_000;

/** Default pause between two `keepMonitors` rounds (HARU_MONITOR_KEEP_INTERVAL_MS, workers/start.ts). */
export const DEFAULT_MONITOR_KEEP_INTERVAL_MS = 15_000;
