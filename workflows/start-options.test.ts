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
