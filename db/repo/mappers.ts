import {
  type Domain,
  domainSchema,
  eventSchema,
  type Fleet,
  fleetSchema,
  type HaruEvent,
  type Operation,
  operationSchema,
  type Slot,
  slotSchema,
} from '../../schemas/entities';
import type { DomainRow, EventRow, FleetRow, OperationRow, SlotRow } from '../schema';

/** Rows leave the db layer only as objects parsed by schemas/entities.ts, timestamps as ISO strings. */

const iso = (d: Date | string): string => (d instanceof Date ? d : new Date(d)).toISOString();
const isoOrNull = (d: Date | string | null): string | null => (d === null ? null : iso(d));

export const toFleet = (row: FleetRow): Fleet =>
  fleetSchema.parse({
    id: row.id,
    slug: row.slug,
    displayName: row.displayName,
    activeDomainId: row.activeDomainId,
    routeRevision: Number(row.routeRevision),
    policy: row.policy,
    autoFailoverPause: row.autoFailoverPause ?? null,
    createdAt: iso(row.createdAt),
    updatedAt: iso(row.updatedAt),
  });

export const toDomain = (row: DomainRow): Domain =>
  domainSchema.parse({
    id: row.id,
    fleetId: row.fleetId,
    slug: row.slug,
    displayName: row.displayName,
    provider: row.provider,
    placement: row.placement,
    supervisorUrl: row.supervisorUrl,
    supervisor: row.supervisor ?? null,
    servingBaseUrl: row.servingBaseUrl,
    launch: row.launch,
    state: row.state,
    stateChangedAt: iso(row.stateChangedAt),
    lastSeenAt: isoOrNull(row.lastSeenAt),
    consecutiveFailures: row.consecutiveFailures,
    lastError: row.lastError,
  });

export const toSlot = (row: SlotRow): Slot => {
  const base = { id: row.id, domainId: row.domainId, gpuIndex: row.gpuIndex, stateChangedAt: iso(row.stateChangedAt) };
  return slotSchema.parse(
    row.kind === 'inference'
      ? {
          ...base,
          kind: 'inference',
          state: row.state,
          sleepLevel: row.sleepLevel,
          models: row.models,
          wakeFingerprints: row.wakeFingerprints ?? {},
        }
      : {
          ...base,
          kind: 'training',
          state: row.state,
          command: row.command,
          checkpointDir: row.checkpointDir,
          env: row.env ?? {},
        },
  );
};

export const toOperation = (row: OperationRow): Operation =>
  operationSchema.parse({
    id: row.id,
    fleetId: row.fleetId,
    kind: row.kind,
    targetDomainId: row.targetDomainId,
    fromDomainId: row.fromDomainId,
    state: row.state,
    step: row.step,
    reason: row.reason,
    requestedBy: row.requestedBy,
    workflowId: row.workflowId,
    routingCommitted: row.routingCommitted,
    routeRevision: row.routeRevision === null ? null : Number(row.routeRevision),
    error: row.error,
    createdAt: iso(row.createdAt),
    startedAt: isoOrNull(row.startedAt),
    finishedAt: isoOrNull(row.finishedAt),
  });

export const toEvent = (row: EventRow): HaruEvent =>
  eventSchema.parse({
    id: Number(row.id),
    fleetId: row.fleetId,
    operationId: row.operationId,
    domainId: row.domainId,
    type: row.type,
    message: row.message,
    data: row.data,
    createdAt: iso(row.createdAt),
  });
