/** How a training run that crashed while wanted is restarted: exponential backoff, a bounded number of times. */
export interface RestartPolicy {
  /** Delay before the first restart; doubled for each further one. */
  baseMs: number;
  /** The longest delay. */
  maxMs: number;
  /** Restarts in a row after which the slot is left down (reported as `gaveUp`). */
  maxAttempts: number;
  /** A run that stayed up this long before crashing starts the count over. */
  resetAfterMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  baseMs: 1_000,
  maxMs: 60_000,
  maxAttempts: 5,
  resetAfterMs: 600_000,
};

/** Restarts so far and what comes next; `delayMs` null once the attempts are spent. */
export function nextRestart(
  policy: RestartPolicy,
  previousAttempts: number,
  upForMs: number,
): { attempts: number; delayMs: number | null } {
  const attempts = (upForMs >= policy.resetAfterMs ? 0 : previousAttempts) + 1;
  if (attempts > policy.maxAttempts) return { attempts: attempts - 1, delayMs: null };
  return { attempts, delayMs: Math.min(policy.maxMs, policy.baseMs * 2 ** (attempts - 1)) };
}
