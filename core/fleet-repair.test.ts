import type { Operation } from '../schemas/entities';
import { ago, domain, fleet, ID, operation } from './fleet-fixtures';
import { planFleetRepair } from './fleet-repair';

const stored = (over: Partial<Operation> = {}): Operation =>
  ({
    id: ID.op,
    fleetId: ID.fleet,
    kind: 'promote',
    state: 'running',
    targetDomainId: ID.b,
    fromDomainId: ID.a,
    workflowId: `haru/${ID.fleet}/op/${ID.op}`,
    step: 'wakeModels',
    routingCommitted: false,
    reason: null,
    requestedBy: 'test',
    error: null,
    createdAt: ago(60_000),
    updatedAt: ago(1_000),
    startedAt: ago(60_000),
    finishedAt: null,
    ...over,
  }) as Operation;

/** Standby `b` left awake (serving, trainer idle) while `operation` (started `startedAgoMs` ago) is in flight. */
const awakeStandbyDuring = (startedAgoMs: number) =>
  fleet({
    inFlightOperation: operation({ createdAt: ago(startedAgoMs) }),
    domains: [
      domain({ slots: [{ kind: 'inference', gpuIndex: 0, state: 'serving' }] }),
      domain({
        id: ID.b,
        slug: 'b',
        slots: [
          { kind: 'inference', gpuIndex: 0, state: 'serving' },
          { kind: 'training', gpuIndex: 0, state: 'idle' },
        ],
      }),
    ],
  });

describe('planFleetRepair', () => {
  it('only makes sure of the monitor for a fleet with nothing wrong', () => {
    expect(planFleetRepair({ fleet: fleet(), operation: null, workflowStatus: null }).map((s) => s.kind)).toEqual([
      'ensure_monitor',
    ]);
  });

  it('ends an operation whose workflow closed, then repairs the standby it left awake', () => {
    const steps = planFleetRepair({
      fleet: awakeStandbyDuring(60_000),
      operation: stored(),
      workflowStatus: 'TERMINATED',
    });
    expect(steps.map((s) => s.kind)).toEqual(['end_orphaned_operation', 'repair_host', 'ensure_monitor']);
    expect(steps[0]).toMatchObject({
      operationId: ID.op,
      why: expect.stringMatching(/ended TERMINATED .* in wakeModels: ended as failed/),
    });
    expect(steps[1]).toMatchObject({ domainId: ID.b, repair: 'restoreStandby' });
  });

  it('ends a running row whose workflow does not exist, and starts a pending one whose workflow was never started', () => {
    expect(planFleetRepair({ fleet: fleet(), operation: stored(), workflowStatus: null })[0]).toMatchObject({
      kind: 'end_orphaned_operation',
    });
    expect(
      planFleetRepair({ fleet: fleet(), operation: stored({ state: 'pending', step: null }), workflowStatus: null })[0],
    ).toMatchObject({ kind: 'start_operation', operationId: ID.op });
  });

  it('leaves a running operation and its hosts alone', () => {
    const steps = planFleetRepair({
      fleet: awakeStandbyDuring(1_000),
      operation: stored(),
      workflowStatus: 'RUNNING',
    });
    expect(steps.map((s) => s.kind)).toEqual(['ensure_monitor']);
  });
});
