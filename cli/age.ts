/**
 * Ages as kubectl prints them (`5s`, `3m`, `2h`, `4d`): short, with a second unit only where it still tells
 * something (`90s` under two minutes, `4m30s` under ten, `5h20m` under eight hours, `3d4h` under eight days).
 */
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const YEAR = 365 * DAY;

/** `whole` plus `part` when `part` is not zero: `4m`, `4m30s`. */
const pair = (whole: number, unit: string, part: number, partUnit: string) =>
  part === 0 ? `${whole}${unit}` : `${whole}${unit}${part}${partUnit}`;

/** Milliseconds as a kubectl-style age; a negative one (a clock ahead of ours) reads `0s`. */
export function humanAge(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '0s';
  const seconds = Math.floor(ms / SECOND);
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(ms / MINUTE);
  if (minutes < 10) return pair(minutes, 'm', seconds % 60, 's');
  if (minutes < 3 * 60) return `${minutes}m`;
  const hours = Math.floor(ms / HOUR);
  if (hours < 8) return pair(hours, 'h', minutes % 60, 'm');
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(ms / DAY);
  if (days < 8) return pair(days, 'd', hours % 24, 'h');
  if (days < 2 * 365) return `${days}d`;
  const years = Math.floor(ms / YEAR);
  if (years < 8) return pair(years, 'y', days % 365, 'd');
  return `${years}y`;
}

/** The age at `now` of an ISO timestamp; `-` for none (never happened). */
export function ageOf(iso: string | null | undefined, now: Date): string {
  if (!iso) return '-';
  const at = Date.parse(iso);
  return Number.isNaN(at) ? '?' : humanAge(now.getTime() - at);
}
