import type { DomainLayout, ModelBinding, SlotLayout } from '../../schemas/layout';
import type { DomainRow, SlotRow } from '../schema';

/** The columns a layout decides, per table; everything else (state, heartbeats) belongs to the monitor. */

export const domainFields = (d: DomainLayout) => ({
  displayName: d.displayName ?? d.slug,
  provider: d.provider,
  placement: d.placement,
  supervisorUrl: d.supervisorUrl,
  supervisor: d.supervisor ?? null,
  servingBaseUrl: d.servingBaseUrl ?? null,
  launch: d.launch ?? null,
});

export const domainFieldsOfRow = (r: DomainRow): ReturnType<typeof domainFields> => ({
  displayName: r.displayName,
  provider: r.provider,
  placement: r.placement,
  supervisorUrl: r.supervisorUrl,
  supervisor: r.supervisor,
  servingBaseUrl: r.servingBaseUrl,
  launch: r.launch,
});

/** The layout-decided columns of a slot row. */
export interface SlotFields {
  sleepLevel: number | null;
  models: ModelBinding[] | null;
  command: string[] | null;
  checkpointDir: string | null;
  env: Record<string, string> | null;
}

export const slotFields = (s: SlotLayout): SlotFields =>
  s.kind === 'inference'
    ? { sleepLevel: s.sleepLevel, models: s.models, command: null, checkpointDir: null, env: null }
    : { sleepLevel: null, models: null, command: s.command, checkpointDir: s.checkpointDir, env: s.env ?? {} };

export const slotFieldsOfRow = (r: SlotRow): SlotFields => ({
  sleepLevel: r.sleepLevel,
  models: r.models,
  command: r.command,
  checkpointDir: r.checkpointDir,
  env: r.env,
});

/** A slot's identity within its domain: one slot of each kind per GPU. */
export const slotKey = (s: { kind: string; gpuIndex: number }) => `gpu${s.gpuIndex}/${s.kind}`;

/** The state a slot starts in before the monitor has observed it. */
export const initialSlotState = (kind: SlotLayout['kind']) => (kind === 'inference' ? 'starting' : 'idle');

/** JSON equality that ignores key order (jsonb reorders keys). */
export function sameJson(a: unknown, b: unknown): boolean {
  return stable(a) === stable(b);
}

function stable(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stable).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stable(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}
