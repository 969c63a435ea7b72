import type { Operation } from '../schemas/entities';
import type { FleetStatus, OperationProgress, StepProgress } from '../schemas/api';
import { domainRole } from '../core/domain-role';
import { formatAge } from '../core/monitor-look';
import { ageOf } from './age';

export { lastFailedOperation } from '../core/last-failed-operation';

/** Left-aligned plain-text table; every cell stringified. */
export function table(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (c ?? '').padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

type SightedDomain = FleetStatus['domains'][number];

/** When the watcher last heard the domain, as an age; `STALE` once that is past the fleet's stale limit. */
const lastHeard = (d: SightedDomain): string =>
  d.sighting.ageMs === null ? 'never' : `${formatAge(d.sighting.ageMs)} ago${d.sighting.isStale ? ' STALE' : ''}`;

/**
 * A domain's slots with the states its host last reported, or `unknown` for each while that report is not
 * current (the domain is stale or failed): a dead host's last word is not its state now.
 */
function slotsOf(d: SightedDomain): string {
  const known = d.sighting.isReportCurrent;
  return d.slots
    .map((s) =>
      s.kind === 'inference'
        ? `gpu${s.gpuIndex}:${known ? s.state : 'unknown'}[${s.models.map((m) => m.name).join(',')}]`
        : `gpu${s.gpuIndex}:train:${known ? s.state : 'unknown'}`,
    )
    .join(' ');
}

/** `2026-…Z (5m ago)`: when, and how long ago at `now`. */
const atAndAge = (iso: string, now: Date) => `${iso} (${ageOf(iso, now)} ago)`;

/**
 * One fleet as a human reads it: the pointer, the last failure, each domain with its state, last sighting and
 * slots; `wide` adds each domain's id and when it was last heard.
 */
export function formatFleet(
  fleet: FleetStatus,
  lastFailed: Operation | null = null,
  opts: { now?: Date; wide?: boolean } = {},
): string {
  const now = opts.now ?? new Date();
  const active = fleet.domains.find((d) => d.id === fleet.activeDomainId);
  const lines = [
    `fleet ${fleet.slug} (${fleet.id})`,
    `  active: ${active ? active.slug : 'none'}   route revision: ${fleet.routeRevision}   auto-failover: ${fleet.policy.autoFailover ? 'on' : 'off'}`,
  ];
  const pause = fleet.autoFailoverPause;
  if (pause)
    lines.push(
      `  auto-failover paused by ${pause.by} at ${atAndAge(pause.at, now)}${pause.reason ? `: ${pause.reason}` : ''}`,
    );
  if (fleet.inFlightOperation) {
    const op = fleet.inFlightOperation;
    lines.push(`  in flight: ${op.kind} ${op.id} (${op.state}${op.step ? `, step ${op.step}` : ''})`);
  }
  if (lastFailed) {
    const error = lastFailed.error
      ? `${lastFailed.error.step}: ${lastFailed.error.code}: ${lastFailed.error.message}`
      : 'no error recorded';
    const at = lastFailed.finishedAt ? atAndAge(lastFailed.finishedAt, now) : '?';
    lines.push(`  last failed: ${lastFailed.kind} ${lastFailed.id} at ${at}: ${error}`);
  }
  lines.push('');
  // wide: the exact time and the id before SLOTS, which stays last (its cell has spaces).
  const headers = ['DOMAIN', 'ROLE', 'STATE', 'PROVIDER', 'LAST HEARD', ...(opts.wide ? ['LAST HEARD AT', 'ID'] : [])];
  lines.push(
    table(
      [...headers, 'SLOTS'],
      fleet.domains.map((d) => [
        d.slug,
        domainRole(d.state, d.id === fleet.activeDomainId),
        d.state,
        d.provider,
        lastHeard(d),
        ...(opts.wide ? [d.sighting.lastSeenAt, d.id] : []),
        slotsOf(d),
      ]),
    ),
  );
  return lines.join('\n');
}

export function formatOperation(op: Operation): string {
  const err = op.error ? `  error: ${op.error.step}: ${op.error.code}: ${op.error.message}` : '';
  return [`${op.kind} ${op.id}  ${op.state}${op.step ? ` (step ${op.step})` : ''}  ${op.reason}`, err]
    .filter(Boolean)
    .join('\n');
}

/** Milliseconds as `1.23s` (or `850ms` under a second). */
export function formatElapsed(ms: number): string {
  return ms < 1_000 ? `${Math.round(ms)}ms` : `${(ms / 1_000).toFixed(2)}s`;
}

function stepElapsed(step: StepProgress, now: Date): string {
  if (!step.startedAt) return '';
  const end = step.finishedAt ? Date.parse(step.finishedAt) : now.getTime();
  return formatElapsed(end - Date.parse(step.startedAt));
}

const MARK: Record<StepProgress['status'], string> = {
  pending: ' ',
  running: '>',
  succeeded: '✓',
  failed: '✗',
  skipped: '-',
};

/** The promotion's last step: the old active's demotion, best effort (its failure does not fail the promotion). */
export const BEST_EFFORT_STEP = 'demoteOldActive';

/**
 * The lines to print when progress moves from `previous` to `next`: one per step whose status changed,
 * each with its elapsed time (and attempts/last error when a step failed or retried).
 */
export function progressChanges(previous: OperationProgress | null, next: OperationProgress, now: Date): string[] {
  const before = new Map((previous?.steps ?? []).map((s) => [s.step, s]));
  const lines: string[] = [];
  for (const step of next.steps) {
    const old = before.get(step.step);
    if (old && old.status === step.status && old.attempts === step.attempts) continue;
    if (!old && step.status === 'pending') continue;
    const bestEffort = step.step === BEST_EFFORT_STEP;
    const extra = [
      bestEffort ? 'best effort' : '',
      step.attempts > 1 ? `attempt ${step.attempts}` : '',
      step.lastError && step.status !== 'succeeded' ? step.lastError : '',
    ].filter(Boolean);
    lines.push(
      `  ${bestEffort && step.status === 'failed' ? '!' : MARK[step.status]} ${step.step.padEnd(18)} ${step.status.padEnd(9)} ${stepElapsed(step, now).padStart(8)}${extra.length ? `  (${extra.join('; ')})` : ''}`,
    );
  }
  return lines;
}
