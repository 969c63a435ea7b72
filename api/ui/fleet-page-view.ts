import { monitorLook, monitorStaleAfterMs } from '../../core/monitor-look';
import type { OperationProgress } from '../../schemas/api';
import type { FleetSnapshot, Operation } from '../../schemas/entities';
import type { FleetHealth } from '../../schemas/health';
import type { HostReading, MonitorLook } from '../../schemas/status';
import { agoOf, agoText } from './ages';
import { type DomainRow, domainRows, type Tone } from './domain-rows';
import { type OperationRow, operationRow, operationsToShow } from './operation-rows';
import type { TemporalUi } from './temporal-link';

/** Something the on-call engineer must see first: `critical` when traffic is or could be lost. */
export interface Warning {
  level: 'critical' | 'warning';
  text: string;
}

/** What the fleet page is built from: the sources of the status, health and operations routes. */
export interface FleetPageInput {
  fleet: FleetSnapshot;
  /** The monitor's `health` query; null when it did not answer. */
  monitor: FleetHealth | null;
  /** The fleet's operations, newest first (enough of them to find the last failed one). */
  operations: readonly Operation[];
  /** Each asked operation's `progress` query by operation id; null: no answer. */
  progress: ReadonlyMap<string, OperationProgress | null>;
  /** What each domain's host answered now, by domain id; absent: not read. */
  hosts: ReadonlyMap<string, HostReading>;
  /** Requests this API process holds for a route move, and how many it may; null when not known. */
  held: { count: number; max: number } | null;
  /** Where the Temporal Web UI runs, for links to each operation's workflow; null: ids without links. */
  temporalUi?: TemporalUi | null;
  now: Date;
}

/** One fleet as the page shows it (`fleetPage`). */
export interface FleetPage {
  slug: string;
  displayName: string;
  routeRevision: number;
  /** When the page was put together (ISO). */
  at: string;
  /** The active domain's slug; null when the pointer names none. */
  active: string | null;
  autoFailover: { text: string; tone: Tone };
  monitor: { text: string; tone: Tone };
  held: string | null;
  warnings: Warning[];
  domains: DomainRow[];
  lastFailed: OperationRow | null;
  operations: OperationRow[];
}

const critical = (text: string): Warning => ({ level: 'critical', text });
const warning = (text: string): Warning => ({ level: 'warning', text });

/**
 * What must be seen first, most urgent first: no active or a failed or silent one; no standby that could take
 * over (`standbyViability` for each, as the monitor decides); a pause or a policy without automatic failover; a
 * monitor that does not answer or has not looked for longer than it ever should (`look`; null: not asked). Pure.
 */
export function fleetWarnings(
  fleet: FleetSnapshot,
  rows: readonly DomainRow[],
  look: MonitorLook | null,
  now: Date,
): Warning[] {
  const warnings: Warning[] = [];
  const active = rows.find((r) => r.role === 'active');
  if (!active) warnings.push(critical('No active domain: nothing serves this fleet'));
  else if (active.state === 'failed') warnings.push(critical(`Active ${active.slug} is failed`));
  else if (active.isStale) warnings.push(critical(`Active ${active.slug} is silent: last heard ${active.heard}`));
  if (!rows.some((r) => r.takeover?.isReady)) {
    warnings.push(critical('No standby ready: auto-failover could not move traffic'));
  }
  const pause = fleet.autoFailoverPause;
  if (pause) {
    warnings.push(
      warning(`Auto-failover paused by ${pause.by} ${agoOf(pause.at, now)}${pause.reason ? `: ${pause.reason}` : ''}`),
    );
  } else if (!fleet.policy.autoFailover) {
    warnings.push(warning('Auto-failover is off in the fleet policy: only an operator moves traffic'));
  }
  if (look?.isStale) {
    warnings.push(
      warning(
        look.checkedAt === null
          ? 'Monitor not answering: no failover is being decided'
          : `Monitor last looked ${agoText(look.ageMs)}: no failover is being decided`,
      ),
    );
  }
  return warnings;
}

/** The monitor's last look in a line: its age, its verdict on the active, what blocks a failover. */
function monitorSummary(monitor: FleetHealth | null, look: MonitorLook): { text: string; tone: Tone } {
  if (!monitor) return { text: 'no answer', tone: 'bad' };
  const failure = monitor.activeFailure;
  const parts = [
    `looked ${agoText(look.ageMs)}`,
    failure ? `active failed (${failure.reason}: ${failure.message})` : 'active healthy',
    monitor.failoverBlockedBy ? `failover blocked by ${monitor.failoverBlockedBy}` : '',
  ];
  return { text: parts.filter(Boolean).join('; '), tone: look.isStale || failure ? 'bad' : 'ok' };
}

/** The fleet page at `input.now`, from the routes' own sources and decisions. Pure. */
export function fleetPage(input: FleetPageInput): FleetPage {
  const { fleet, now } = input;
  const domains = domainRows(fleet, input.hosts, now);
  const look = monitorLook(input.monitor?.checkedAt ?? null, now, monitorStaleAfterMs(fleet.policy));
  const slugOf = (id: string) => fleet.domains.find((d) => d.id === id)?.slug ?? id;
  const row = (op: Operation) => operationRow(op, input.progress.get(op.id), slugOf, now, input.temporalUi ?? null);
  const { shown, lastFailed } = operationsToShow(input.operations);
  return {
    slug: fleet.slug,
    displayName: fleet.displayName,
    routeRevision: fleet.routeRevision,
    at: now.toISOString(),
    active: domains.find((d) => d.role === 'active')?.slug ?? null,
    autoFailover: fleet.autoFailoverPause
      ? { text: 'paused', tone: 'warn' }
      : fleet.policy.autoFailover
        ? { text: 'on', tone: 'ok' }
        : { text: 'off', tone: 'warn' },
    monitor: monitorSummary(input.monitor, look),
    held: input.held && `${input.held.count} of at most ${input.held.max} (this API process)`,
    warnings: fleetWarnings(fleet, domains, look, now),
    domains,
    lastFailed: lastFailed && row(lastFailed),
    operations: shown.map(row),
  };
}

/** A fleet in the page's list of fleets: its active and what must be seen first (no monitor asked). Pure. */
export function fleetSummary(
  fleet: FleetSnapshot,
  now: Date,
): { slug: string; active: string | null; warnings: Warning[] } {
  const rows = domainRows(fleet, new Map(), now);
  return {
    slug: fleet.slug,
    active: rows.find((r) => r.role === 'active')?.slug ?? null,
    warnings: fleetWarnings(fleet, rows, null, now),
  };
}
