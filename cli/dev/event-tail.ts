import type { HaruEvent } from '../../schemas/entities';

export interface EventTailDeps {
  /** Events of the fleet after `after` (ascending id). */
  list(after: number): Promise<HaruEvent[]>;
  write(line: string): void;
  intervalMs?: number;
}

export interface EventTail {
  stop(): Promise<void>;
}

/** `12:03:04  domain.failed          active domain east failed 3 consecutive polls` */
export function formatEventLine(e: HaruEvent): string {
  const time = new Date(e.createdAt).toTimeString().slice(0, 8);
  return `${time}  ${e.type.padEnd(24)} ${e.message}`;
}

/**
 * Prints the fleet's audit events as they are written, starting after `cursor`, so the terminal running
 * `haru dev` narrates a failover. A failed read is retried at the next tick (the store may be busy).
 */
export function startEventTail(deps: EventTailDeps, cursor: number): EventTail {
  let after = cursor;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  const tick = () => {
    inFlight = (async () => {
      try {
        for (const e of await deps.list(after)) {
          deps.write(formatEventLine(e));
          after = Math.max(after, e.id);
        }
      } catch {
        // Next tick retries.
      }
      if (!stopped) timer = setTimeout(tick, deps.intervalMs ?? 500);
    })();
  };
  tick();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inFlight;
    },
  };
}

/** The newest event id of a fleet (0 when none), so a tail starts after what an earlier run wrote. */
export async function latestEventId(list: (after: number, limit: number) => Promise<HaruEvent[]>): Promise<number> {
  let after = 0;
  for (;;) {
    const page = await list(after, 1_000);
    if (page.length === 0) return after;
    after = page.at(-1)!.id;
  }
}
