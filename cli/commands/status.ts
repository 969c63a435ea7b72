import type { Command } from 'commander';
import { domainRole } from '../../core/domain-role';
import { formatAge } from '../../core/monitor-look';
import {
  type DomainStatusResponse,
  domainStatusResponseSchema,
  type FleetHealthResponse,
  fleetHealthResponseSchema,
  type PolledDomain,
  type TrainingProgress,
} from '../../schemas/status';
import { ageOf } from '../age';
import { apiClientFor } from '../connection';
import { table } from '../format';
import { isData, isWide, type OutputOptions, renderData } from '../output';

const MIB_PER_GIB = 1024;
const gib = (mib: number | null) => (mib === null ? '?' : `${(mib / MIB_PER_GIB).toFixed(1)}`);
/** `120/1000 loss 1.234 (3s ago)`; the error when the trainer's report could not be read. */
function progress(p: TrainingProgress['progress']): string | null {
  if (!p) return null;
  const age = p.ageMs === null ? '' : ` (${formatAge(p.ageMs)} ago)`;
  if (p.error !== null) return `unreadable: ${p.error}${age}`;
  const loss = p.loss === null ? '' : ` loss ${p.loss.toPrecision(4)}`;
  return `${p.step}${p.totalSteps === null ? '' : `/${p.totalSteps}`}${loss}${age}`;
}
/** When the watcher last heard the domain and how long ago; `STALE` once past the fleet's stale limit. */
const lastPoll = (d: PolledDomain) =>
  `${d.lastSeenAt ? `${d.lastSeenAt} (${formatAge(d.lastSeenAgeMs)} ago)` : 'never'}${d.isStale ? ' STALE' : ''}`;

/** The LAST HEARD cell: how long ago (to the millisecond near now: a heartbeat is half a second), `STALE` past the limit. */
const lastHeardAge = (d: PolledDomain) =>
  `${d.lastSeenAt ? `${formatAge(d.lastSeenAgeMs)} ago` : 'never'}${d.isStale ? ' STALE' : ''}`;

/**
 * `haru fleet health` as a human reads it: the monitor's look and its age, then each domain's last poll as an
 * age (`wide`: its time as well).
 */
export function formatFleetHealth(h: FleetHealthResponse, opts: { wide?: boolean } = {}): string {
  const look = h.monitorLook;
  const lines = [`fleet ${h.fleetSlug} (${h.fleetId})`];
  if (!h.monitor) {
    lines.push(`  monitor: no answer (not running, Temporal unreachable, or no poll yet): STALE`);
  } else {
    const age = formatAge(look.ageMs);
    lines.push(
      `  monitor looked ${age} ago (${look.checkedAt})${look.isStale ? `: STALE (older than ${formatAge(look.staleAfterMs)}; is the monitor polling?)` : ''}`,
    );
    const failure = h.monitor.activeFailure;
    lines.push(
      `  active: ${failure ? `FAILED (${failure.reason}: ${failure.message})` : 'healthy'}   auto-failover: ${h.monitor.isAutoFailoverPaused ? 'paused' : h.monitor.autoFailover ? 'on' : 'off'}${h.monitor.failoverBlockedBy ? `   failover blocked by: ${h.monitor.failoverBlockedBy}` : ''}`,
    );
  }
  const assessed = new Map(h.monitor?.domains.map((d) => [d.domainId, d]) ?? []);
  lines.push('');
  lines.push(
    table(
      [
        'DOMAIN',
        'ROLE',
        'STATE',
        'MONITOR SAYS',
        'LAST HEARD',
        ...(opts.wide ? ['LAST HEARD AT'] : []),
        'FAILURES',
        'LAST ERROR',
      ],
      h.domains.map((d) => {
        const a = assessed.get(d.id);
        return [
          d.slug,
          domainRole(d.state, d.isActive),
          d.state,
          a ? `${a.status}${a.reasons.length ? ` (${a.reasons.join(', ')})` : ''}` : null,
          lastHeardAge(d),
          ...(opts.wide ? [d.lastSeenAt] : []),
          d.consecutiveFailures,
          d.lastError,
        ];
      }),
    ),
  );
  return lines.join('\n');
}

/** `haru domain status` as a human reads it: stored state and last poll, then models, training and GPUs now. */
export function formatDomainStatus(s: DomainStatusResponse, now: Date = new Date()): string {
  const d = s.domain;
  const lines = [
    `domain ${d.slug} of fleet ${s.fleetSlug}: ${d.state}${d.isActive ? ' (active)' : ''}`,
    `  last poll: ${lastPoll(d)}   consecutive failures: ${d.consecutiveFailures}${d.lastError ? `   last error: ${d.lastError}` : ''}`,
  ];
  const host = s.host;
  if (!host.isReachable) {
    lines.push(`  host: UNREACHABLE now: ${host.error ?? 'no answer'}`);
    return lines.join('\n');
  }
  lines.push(`  host answered at ${host.at}${host.error ? ` (${host.error})` : ''}`, '');
  lines.push(
    table(
      ['MODEL', 'GPU', 'STATE', 'RUNNING REQUESTS', 'ERROR'],
      host.models.map((m) => [m.name, m.gpuIndex, m.state, m.runningRequests, m.error]),
    ),
    '',
  );
  lines.push(
    table(
      ['TRAINING GPU', 'STATE', 'PIDS', 'RUNNING FOR', 'PROGRESS', 'RESTARTS', 'LAST EXIT'],
      host.training.map((t) => [
        t.gpuIndex,
        t.state,
        t.pids.join(',') || null,
        t.runningForMs === null ? null : formatAge(t.runningForMs),
        progress(t.progress),
        t.restart ? `${t.restart.attempts}${t.restart.gaveUp ? ' (gave up)' : ''}` : 0,
        t.lastExit ? `${t.lastExit.code ?? t.lastExit.signal} ${ageOf(t.lastExit.at, now)} ago` : null,
      ]),
    ),
    '',
  );
  lines.push(
    table(
      ['GPU', 'USED GiB', 'TOTAL GiB', 'SOURCE', 'PROCESSES', 'ERROR'],
      host.gpus.map((g) => [
        g.index,
        gib(g.usedMiB),
        gib(g.totalMiB),
        g.source,
        g.processes.map((p) => `${p.pid}:${p.usedMiB ?? '?'}MiB`).join(' ') || null,
        g.error ? `${g.error.kind}: ${g.error.message}` : null,
      ]),
    ),
  );
  return lines.join('\n');
}

const fleetPath = (fleet: string) => `/v1/fleets/${encodeURIComponent(fleet)}`;
const out = (text: string) => process.stdout.write(`${text}\n`);

/** `haru fleet health <fleet>` on the `fleet` command. */
export function registerFleetHealth(fleet: Command): void {
  fleet
    .command('health <fleet>')
    .description("each domain's last poll and its age, and the monitor's assessment with the age of its last look")
    .option('--json', 'print JSON')
    .action(async (ref: string, opts: OutputOptions, cmd: Command) => {
      const health = await apiClientFor(cmd).get(`${fleetPath(ref)}/health`, fleetHealthResponseSchema);
      out(isData(opts) ? renderData(health, opts) : formatFleetHealth(health, { wide: isWide(opts) }));
    });
}

/** `haru domain status <fleet> <domain>` on the `domain` command. */
export function registerDomainStatus(domain: Command): void {
  domain
    .command('status <fleet> <domain>')
    .description(
      "one domain: state and last poll, each model's state, training runs and their progress, GPU memory per GPU",
    )
    .option('--json', 'print JSON')
    .action(async (fleet: string, ref: string, opts: OutputOptions, cmd: Command) => {
      const status = await apiClientFor(cmd).get(
        `${fleetPath(fleet)}/domains/${encodeURIComponent(ref)}/status`,
        domainStatusResponseSchema,
      );
      out(isData(opts) ? renderData(status, opts) : formatDomainStatus(status));
    });
}
