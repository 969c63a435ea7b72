import { type SearchAttributePair, WorkflowIdConflictPolicy, WorkflowIdReusePolicy } from '@temporalio/common';
import { defaultFleetPolicy } from '../schemas/policy';
import {
  demotionChildStart,
  monitorStart,
  operationStart,
  type OperationToStart,
  provisionStart,
  slugsOf,
  teardownStart,
  watchShardStart,
} from './start-options';

const FLEET = '6f1c8f64-0a4e-4c55-9d44-3c1e3f5a0001';
const OP = '6f1c8f64-0a4e-4c55-9d44-3c1e3f5a0002';
const WEST = '6f1c8f64-0a4e-4c55-9d44-3c1e3f5a0003';
const EAST = '6f1c8f64-0a4e-4c55-9d44-3c1e3f5a0004';

const promote: OperationToStart = {
  id: OP,
  fleetId: FLEET,
  kind: 'promote',
  targetDomainId: WEST,
  reason: 'drill',
  requestedBy: 'api',
};

/** Every start carries a summary and details for the Web UI (their text is checked below). */
const shownInTheWebUi = { staticSummary: expect.any(String), staticDetails: expect.any(String) };

/** Search attributes by name, as the Web UI filters them. */
const attributes = (pairs: SearchAttributePair[]) => Object.fromEntries(pairs.map((p) => [p.key.name, p.value]));

describe('operationStart', () => {
  it('starts a promotion toward its target under the operation id, refusing a second run', () => {
    const start = operationStart(promote);
    expect(start.workflowType).toBe('promotionWorkflow');
    expect(start.options).toEqual({
      workflowId: `haru/${FLEET}/op/${OP}`,
      args: [{ fleetId: FLEET, operationId: OP, targetDomainId: WEST, reason: 'drill' }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      typedSearchAttributes: expect.any(Array),
      memo: { reason: 'drill', requestedBy: 'api' },
      priority: { priorityKey: 1 },
      ...shownInTheWebUi,
    });
    expect(attributes(start.options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruDomain: WEST,
      HaruOperation: 'promote',
    });
  });

  it('starts a demotion of its target, refusing a second run as well', () => {
    const start = operationStart({ ...promote, kind: 'demote', reason: 'maintenance', requestedBy: 'monitor' });
    expect(start.workflowType).toBe('demotionWorkflow');
    expect(start.options.workflowId).toBe(`haru/${FLEET}/op/${OP}`);
    expect(start.options.args).toEqual([{ fleetId: FLEET, operationId: OP, domainId: WEST }]);
    expect(start.options.workflowIdReusePolicy).toBe(WorkflowIdReusePolicy.REJECT_DUPLICATE);
    expect(attributes(start.options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruDomain: WEST,
      HaruOperation: 'demote',
    });
    expect(start.options.memo).toEqual({ reason: 'maintenance', requestedBy: 'monitor' });
    // Behind every promotion when the operations queue backs up.
    expect(start.options.priority).toEqual({ priorityKey: 2 });
  });

  it('passes the policy when the caller has it and leaves the key out otherwise (the workflow reads the store)', () => {
    const policy = defaultFleetPolicy();
    expect(operationStart(promote, policy).options.args[0]).toEqual({
      fleetId: FLEET,
      operationId: OP,
      targetDomainId: WEST,
      reason: 'drill',
      policy,
    });
    expect(operationStart({ ...promote, kind: 'demote' }, policy).options.args[0]).toMatchObject({ policy });
    expect(Object.keys(operationStart(promote).options.args[0])).not.toContain('policy');
    expect(Object.keys(operationStart({ ...promote, kind: 'demote' }).options.args[0])).not.toContain('policy');
  });
});

describe('demotionChildStart', () => {
  it("demotes the old active under the promotion's id, as a child that a reset promotion may start again", () => {
    const policy = defaultFleetPolicy();
    const start = demotionChildStart({ fleetId: FLEET, operationId: OP, oldActiveId: EAST, policy });
    expect(start.workflowType).toBe('demotionWorkflow');
    expect(start.options).toEqual({
      workflowId: `haru/${FLEET}/op/${OP}/demote`,
      args: [{ fleetId: FLEET, domainId: EAST, policy }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: expect.any(Array),
      memo: { reason: `demotion after promotion ${OP}`, requestedBy: 'promotion' },
      priority: { priorityKey: 2 },
      ...shownInTheWebUi,
    });
    expect(attributes(start.options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruDomain: EAST,
      HaruOperation: 'demote',
    });
  });
});

describe('monitorStart', () => {
  it("joins the fleet's running monitor and may start one that ended", () => {
    const start = monitorStart(FLEET);
    expect(start.workflowType).toBe('fleetMonitorWorkflow');
    expect(start.options).toEqual({
      workflowId: `haru/${FLEET}/monitor`,
      args: [{ fleetId: FLEET }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      typedSearchAttributes: expect.any(Array),
      ...shownInTheWebUi,
    });
    expect(attributes(start.options.typedSearchAttributes)).toEqual({ HaruFleet: FLEET });
  });
});

describe('provisionStart and teardownStart', () => {
  const request = { fleetId: FLEET, reason: 'standby failed', requestedBy: 'monitor' };

  it("starts a provisioning under the domain's own id, which may run again after a teardown", () => {
    const start = provisionStart({ domainId: WEST, launchTimeoutMs: 60_000 }, request);
    expect(start.workflowType).toBe('provisionDomainWorkflow');
    expect(start.options).toEqual({
      workflowId: `haru/${WEST}/provision`,
      args: [{ domainId: WEST, launchTimeoutMs: 60_000 }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: expect.any(Array),
      memo: { reason: 'standby failed', requestedBy: 'monitor' },
      ...shownInTheWebUi,
    });
    expect(attributes(start.options.typedSearchAttributes)).toEqual({ HaruFleet: FLEET, HaruDomain: WEST });
  });

  it("starts a teardown with the arguments given, under the domain's own id", () => {
    const start = teardownStart({ domainId: WEST, mode: 'down', onlyIfFailed: true }, request);
    expect(start.workflowType).toBe('teardownDomainWorkflow');
    expect(start.options).toEqual({
      workflowId: `haru/${WEST}/teardown`,
      args: [{ domainId: WEST, mode: 'down', onlyIfFailed: true }],
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
      typedSearchAttributes: expect.any(Array),
      memo: { reason: 'standby failed', requestedBy: 'monitor' },
      ...shownInTheWebUi,
    });
    expect(attributes(start.options.typedSearchAttributes)).toEqual({ HaruFleet: FLEET, HaruDomain: WEST });
  });
});

describe('slug search attributes', () => {
  const fleet = {
    slug: 'dev',
    domains: [
      { id: EAST, slug: 'east' },
      { id: WEST, slug: 'west' },
    ],
  };

  it('tags every start with the fleet and domain slugs an operator types, the ids unchanged', () => {
    const promotion = operationStart(promote, undefined, slugsOf(fleet, WEST));
    expect(promotion.options.workflowId).toBe(`haru/${FLEET}/op/${OP}`);
    expect(attributes(promotion.options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruFleetSlug: 'dev',
      HaruDomain: WEST,
      HaruDomainSlug: 'west',
      HaruOperation: 'promote',
    });
    const child = demotionChildStart({
      fleetId: FLEET,
      operationId: OP,
      oldActiveId: EAST,
      slugs: slugsOf(fleet, EAST),
    });
    expect(attributes(child.options.typedSearchAttributes)).toMatchObject({
      HaruFleetSlug: 'dev',
      HaruDomainSlug: 'east',
    });
    expect(attributes(monitorStart(FLEET, 'dev').options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruFleetSlug: 'dev',
    });
    const request = { fleetId: FLEET, reason: 'r', requestedBy: 'monitor', slugs: slugsOf(fleet, WEST) };
    expect(attributes(teardownStart({ domainId: WEST, mode: 'down' }, request).options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruFleetSlug: 'dev',
      HaruDomain: WEST,
      HaruDomainSlug: 'west',
    });
  });

  it('leaves out a slug the starter does not know (a domain not in the fleet)', () => {
    expect(attributes(operationStart(promote, undefined, slugsOf(fleet, OP)).options.typedSearchAttributes)).toEqual({
      HaruFleet: FLEET,
      HaruFleetSlug: 'dev',
      HaruDomain: WEST,
      HaruOperation: 'promote',
    });
  });
});

describe('what the Web UI shows', () => {
  const fleet = {
    slug: 'dev',
    activeDomainId: EAST,
    domains: [
      { id: EAST, slug: 'east' },
      { id: WEST, slug: 'west' },
    ],
  };

  it('sums up a promotion as fleet, from → to and why, with the ids in its details', () => {
    const auto = { ...promote, requestedBy: 'monitor', reason: 'auto-failover: 3 failed polls' };
    const start = operationStart(auto, undefined, slugsOf(fleet, WEST));
    expect(start.options.staticSummary).toBe('promote dev: east → west (monitor: auto-failover: 3 failed polls)');
    expect(start.options.staticDetails.split('\n')).toEqual([
      `fleet: dev (${FLEET})`,
      'from: east',
      `to: west (${WEST})`,
      `operation: ${OP}`,
      'requested by: monitor',
      'reason: auto-failover: 3 failed polls',
    ]);
    // Without the slugs (a starter that has only ids) it still says what it does.
    expect(operationStart(promote).options.staticSummary).toBe(`promote ${FLEET}: the active → ${WEST} (api: drill)`);
  });

  it('sums up demotions, the monitor, watch shards, provisioning and teardown', () => {
    const demote = { ...promote, kind: 'demote' as const, reason: 'maintenance' };
    expect(operationStart(demote, undefined, slugsOf(fleet, EAST)).options.staticSummary).toBe(
      'demote dev/east (api: maintenance)',
    );
    expect(
      demotionChildStart({ fleetId: FLEET, operationId: OP, oldActiveId: EAST, slugs: slugsOf(fleet, EAST) }).options
        .staticSummary,
    ).toBe(`demote dev/east, the old active (promotion: routing moved away (operation ${OP}))`);
    expect(monitorStart(FLEET, 'dev').options.staticSummary).toBe('monitor fleet dev');
    expect(watchShardStart('haru-monitors', 3, 8).options.staticSummary).toBe(
      'watch shard 3 of 8 (queue haru-monitors)',
    );
    const request = { fleetId: FLEET, reason: 'standby failed', requestedBy: 'monitor', slugs: slugsOf(fleet, WEST) };
    expect(provisionStart({ domainId: WEST }, request).options.staticSummary).toBe(
      'provision dev/west (monitor: standby failed)',
    );
    expect(teardownStart({ domainId: WEST, mode: 'stop' }, request).options.staticSummary).toBe(
      'stop dev/west (monitor: standby failed)',
    );
  });

  it('cuts a long reason in the summary and keeps it whole in the details', () => {
    const reason = `auto-failover: ${'x'.repeat(400)}`;
    const start = operationStart({ ...promote, reason }, undefined, slugsOf(fleet, WEST));
    expect(start.options.staticSummary).toHaveLength(200);
    expect(start.options.staticSummary.endsWith('…')).toBe(true);
    expect(start.options.staticDetails).toContain(`reason: ${reason}`);
  });
});
