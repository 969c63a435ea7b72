import { ago, domainSnapshot, ID, NOW, policy } from '../../core/fleet-fixtures';
import type { OperationProgress, StepProgress } from '../../schemas/api';
import type { FleetSnapshot, Operation } from '../../schemas/entities';
import type { FleetPageInput } from '../../api/ui/fleet-page-view';

/** Builders for the fleet page's view and rendering tests (api/ui/), at `NOW` with fixed ids. */
export { ago, ID, NOW };

/** Fleet `prod` with `a` active (awake, heard 1 s ago) and `b` standby (asleep, training, heard 2 s ago). */
export function snapshot(overrides: Partial<FleetSnapshot> = {}): FleetSnapshot {
  return {
    id: ID.fleet,
    slug: 'prod',
    displayName: 'prod',
    activeDomainId: ID.a,
    routeRevision: 3,
    policy: policy({ heartbeatStaleMs: 5_000 }),
    autoFailoverPause: null,
    createdAt: ago(3_600_000),
    updatedAt: ago(3_600_000),
    domains: [domainSnapshot('a', { lastSeenAt: ago(1_000) }), domainSnapshot('b', { lastSeenAt: ago(2_000) })],
    inFlightOperation: null,
    ...overrides,
  };
}

/** A promotion of `b` from `a`, requested 30 s before NOW, which took 4.2 s and succeeded. */
export const promotion = (overrides: Partial<Operation> = {}): Operation => ({
  id: ID.op,
  fleetId: ID.fleet,
  kind: 'promote',
  targetDomainId: ID.b,
  fromDomainId: ID.a,
  state: 'succeeded',
  step: 'demoteOldActive',
  reason: 'drill',
  requestedBy: 'api:oncall',
  workflowId: `haru/${ID.fleet}/op/${ID.op}`,
  routingCommitted: true,
  routeRevision: 4,
  error: null,
  createdAt: ago(30_000),
  startedAt: ago(29_800),
  finishedAt: ago(25_600),
  ...overrides,
});

export const step = (over: Partial<StepProgress> & { step: string }): StepProgress => ({
  status: 'succeeded',
  startedAt: null,
  finishedAt: null,
  attempts: 1,
  lastError: null,
  ...over,
});

export const progress = (steps: StepProgress[], operationId: string = ID.op): OperationProgress => ({
  operationId,
  kind: 'promote',
  phase: 'succeeded',
  steps,
  abortRequested: false,
});

/** The page's input: `snapshot()`, no monitor answer, no operation, no host read, nothing held. */
export const pageInput = (overrides: Partial<FleetPageInput> = {}): FleetPageInput => ({
  fleet: snapshot(),
  monitor: null,
  operations: [],
  progress: new Map(),
  hosts: new Map(),
  held: { count: 0, max: 1_000 },
  now: NOW,
  ...overrides,
});
