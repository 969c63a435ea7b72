import type { FigureSpec } from './guard-compare';

/**
 * The headline figures `bench:guard` measures, and each one's noise band: how far above its baseline a figure
 * may land before it is marked worse. The baseline is the best of three runs, so a band must hold the spread
 * from the best run to the worst. Each band is the worst/best spread measured in three runs on the 2-core
 * machine of 2026-12-03 with other jobs on it (1-minute load average 18-35; `--runs 3` prints that spread),
 * rounded up for what three runs leave unseen. Narrow them when the baseline is re-recorded on a quiet machine.
 */
export const GUARD_FIGURES = {
  // The kill lands anywhere in the 500 ms poll cycle, so this one spreads by itself: 3.4x (1.4-4.8 s) under
  // that load, 1.4x (178-254 ms) on the quiet machine of docs/performance.md.
  detection: { figure: 'failover: kill -> promote decision', unit: 'ms', band: 2.5, isGated: true },
  // Measured 1.37x, 1.34x and 1.47x (1.02-1.06x in quiet runs of bench:failover).
  decisionToCommit: { figure: 'failover: decision -> routing committed', unit: 'ms', band: 0.5, isGated: true },
  killToFirstAnswer: {
    figure: 'failover: kill -> first answer from the new active',
    unit: 'ms',
    band: 0.5,
    isGated: true,
  },
  overhead: { figure: 'failover: orchestration overhead', unit: 'ms', band: 0.6, isGated: true },
  // Tens of ms, so one descheduling doubles a read: measured 1.96x and 2.00x.
  statusAsleep: { figure: 'supervisor status read, models asleep', unit: 'ms', band: 1.0, isGated: true },
  statusAwake: { figure: 'supervisor status read, models awake', unit: 'ms', band: 1.0, isGated: true },
  // CPU time, not wall time, but a loaded machine still inflates it: measured 1.39x; the ratio to the bare
  // forwarder of the same rounds 1.37x. The forwarder itself (1.90x) is the yardstick, never marked.
  proxyCpu: { figure: 'proxy CPU per request, Haru', unit: 'ms', band: 0.5, isGated: true },
  bareNodeCpu: { figure: 'proxy CPU per request, bare Node forwarder', unit: 'ms', band: 0.5, isGated: false },
  proxyCpuOverBareNode: { figure: 'proxy CPU per request, Haru / bare Node', unit: 'x', band: 0.5, isGated: true },
} as const satisfies Record<string, FigureSpec>;

/** Every figure, in the order the guard prints them. */
export const GUARD_SPECS: readonly FigureSpec[] = Object.values(GUARD_FIGURES);
