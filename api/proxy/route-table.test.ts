import type { DomainSnapshot, FleetSnapshot, Operation } from '../../schemas/entities';
import { defaultFleetPolicy } from '../../schemas/policy';
import { holdReason, routeModel } from './route-table';

const EAST = '00000000-0000-4000-8000-00000000000e';
const WEST = '00000000-0000-4000-8000-00000000000f';
const T = '2026-01-01T00:00:00.000Z';

const domain = (
  id: string,
  slug: string,
  models: string[],
  overrides: Partial<DomainSnapshot> = {},
): DomainSnapshot => ({
  id,
  fleetId: '00000000-0000-4000-8000-000000000001',
  slug,
  displayName: slug,
  provider: 'static',
  placement: {},
  supervisorUrl: 'http://127.0.0.1:9',
  servingBaseUrl: null,
  launch: null,
  state: 'ready',
  stateChangedAt: T,
  lastSeenAt: T,
  consecutiveFailures: 0,
  lastError: null,
  isActive: false,
  slots: [
    {
      id: `${id.slice(0, -1)}a`,
      domainId: id,
      gpuIndex: 0,
      stateChangedAt: T,
      kind: 'inference',
      state: 'serving',
      sleepLevel: 1,
      models: models.map((name) => ({ name, servingUrl: `http://${slug}:8000` })),
    },
  ],
  ...overrides,
});

const fleet = (overrides: Partial<FleetSnapshot> = {}): FleetSnapshot => ({
  id: '00000000-0000-4000-8000-000000000001',
  slug: 'f',
  displayName: 'f',
  activeDomainId: EAST,
  routeRevision: 1,
  policy: defaultFleetPolicy(),
  createdAt: T,
  updatedAt: T,
  domains: [domain(EAST, 'east', ['a', 'b']), domain(WEST, 'west', ['a', 'c'])],
  inFlightOperation: null,
  ...overrides,
});

const promotion = (target: string, state: Operation['state'] = 'running'): Operation => ({
  id: '00000000-0000-4000-8000-0000000000aa',
  fleetId: '00000000-0000-4000-8000-000000000001',
  kind: 'promote',
  targetDomainId: target,
  fromDomainId: EAST,
  state,
  step: null,
  reason: 'r',
  requestedBy: 't',
  workflowId: 'w',
  routingCommitted: false,
  routeRevision: null,
  error: null,
  createdAt: T,
  startedAt: null,
  finishedAt: null,
});

describe('routeModel', () => {
  it('routes an exact model name to its servingUrl on the active domain', () => {
    const target = routeModel(fleet(), 'b');
    expect(target).toMatchObject({ kind: 'ok', servingUrl: 'http://east:8000' });
  });
  it('refuses a name that differs only in case and lists the routable names', () => {
    const target = routeModel(fleet(), 'A');
    expect(target.kind).toBe('error');
    if (target.kind === 'error') {
      expect(target.error.code).toBe('model_not_found');
      expect(target.error.message).toContain('a, b');
    }
  });
  it('answers no_active_domain when the pointer is empty', () => {
    const target = routeModel(fleet({ activeDomainId: null }), 'a');
    expect(target.kind === 'error' && target.error.code).toBe('no_active_domain');
  });
});

describe('holdReason', () => {
  it('holds while a promotion toward a domain serving the model is in flight', () => {
    expect(holdReason(fleet({ inFlightOperation: promotion(WEST) }), 'a', false)).toBe('promotion_in_flight');
    expect(holdReason(fleet({ inFlightOperation: promotion(WEST, 'pending') }), 'c', false)).toBe(
      'promotion_in_flight',
    );
  });
  it('does not hold for a model the promotion target does not serve, with auto-failover off', () => {
    const policy = { ...defaultFleetPolicy(), autoFailover: false };
    expect(holdReason(fleet({ policy, inFlightOperation: promotion(WEST) }), 'b', true)).toBeNull();
  });
  it('holds under auto-failover only when the active is failing and a ready standby serves the model', () => {
    expect(holdReason(fleet(), 'a', false)).toBeNull();
    expect(holdReason(fleet(), 'a', true)).toBe('auto_failover');
    const failing = fleet({ domains: [domain(EAST, 'east', ['a'], { state: 'failed' }), domain(WEST, 'west', ['a'])] });
    expect(holdReason(failing, 'a', false)).toBe('auto_failover');
    expect(holdReason(fleet(), 'b', true)).toBeNull();
    const standbyDown = fleet({
      domains: [domain(EAST, 'east', ['a']), domain(WEST, 'west', ['a'], { state: 'failed' })],
    });
    expect(holdReason(standbyDown, 'a', true)).toBeNull();
  });
  it('never holds when auto-failover is off and nothing is in flight', () => {
    expect(holdReason(fleet({ policy: { ...defaultFleetPolicy(), autoFailover: false } }), 'a', true)).toBeNull();
  });
});
