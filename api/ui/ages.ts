/**
 * Times as the fleet page prints them: whole units an on-call engineer reads at a glance (`12 s ago`,
 * `4 min 05 s ago`), durations to a tenth of a second under a minute (`850 ms`, `12.3 s`).
 */

const SECOND_MS = 1_000;
const MINUTE_MS = 60 * SECOND_MS;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

const pad = (n: number) => String(n).padStart(2, '0');

/** A span in its two largest whole units: `12 s`, `4 min 05 s`, `3 h 07 min`, `2 d 4 h`. */
function span(ms: number): string {
  if (ms < MINUTE_MS) return `${Math.floor(ms / SECOND_MS)} s`;
  if (ms < HOUR_MS) return `${Math.floor(ms / MINUTE_MS)} min ${pad(Math.floor((ms % MINUTE_MS) / SECOND_MS))} s`;
  if (ms < DAY_MS) return `${Math.floor(ms / HOUR_MS)} h ${pad(Math.floor((ms % HOUR_MS) / MINUTE_MS))} min`;
  return `${Math.floor(ms / DAY_MS)} d ${Math.floor((ms % DAY_MS) / HOUR_MS)} h`;
}

/** An age in milliseconds as `12 s ago`; `never` for null; a negative one (a clock ahead of ours) as `0 s ago`. */
export const agoText = (ms: number | null): string => (ms === null ? 'never' : `${span(Math.max(0, ms))} ago`);

/** The age at `now` of an ISO time, as `agoText` writes it. */
export const agoOf = (iso: string, now: Date): string => agoText(now.getTime() - Date.parse(iso));

/** A duration: `850 ms` under a second, `12.3 s` under a minute, then as `span` (`4 min 05 s`). */
export function durationText(ms: number): string {
  const at = Math.max(0, ms);
  if (at < SECOND_MS) return `${Math.round(at)} ms`;
  if (at < MINUTE_MS) return `${(at / SECOND_MS).toFixed(1)} s`;
  return span(at);
}
