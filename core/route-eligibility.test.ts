import { domainSnapshot, ID, NOW } from './fleet-fixtures';
import { expectedFailoverSeconds, ineligibility, routeTargets } from './route-eligibility';
import type { FleetSnapshot } from '../schemas/entities';
import { defaultFleetPolicy } from '../schemas/policy';

const snapshot = (a = domainSnapshot('a'), b = domainSnapshot('b')): FleetSnapshot => ({
  id: ID.fleet,
  slug: 'prod',
  displayName: 'prod',
  activeDomainId: ID.a,
  routeRevision: 3,
  policy: defaultFleetPolicy(),
  createdAt: NOW.toISOString(),
  updatedAt: NOW.toISOString(),
  inFlightOperation: null,
  domains: [a, b],
});

describe('route eligibility', () => {
  it('gives a serving active weight 100 and lists the sleeping standby with weight 0, not eligible', () => {
    const { active, standbys } = routeTargets(snapshot());
    expect(active).toEqual({
      domainId: ID.a,
      domainSlug: 'a',
      endpointUrl: 'http://vllm-a/v1',
      eligible: true,
      weight: 100,
      models: [{ name: 'llama', servingUrl: 'http://vllm-a/v1', eligible: true }],
    });
    expect(standbys).toEqual([
      expect.objectContaining({
        domainSlug: 'b',
        eligible: false,
        weight: 0,
        models: [expect.objectContaining({ eligible: false })],
      }),
    ]);
  });

  it.each(['failed', 'provisioning', 'stopping', 'stopped'] as const)(
    'makes an active that is %s ineligible',
    (state) => {
      const { active } = routeTargets(snapshot(domainSnapshot('a', { state })));
      expect(active).toMatchObject({ eligible: false, weight: 0, models: [{ eligible: false }] });
      expect(ineligibility(domainSnapshot('a', { state }), 'llama')).toBe(`domain a is ${state}`);
    },
  );

  it.each(['sleeping', 'waking', 'probing', 'failed', 'stopped'] as const)(
    'makes a model whose slot is %s ineligible',
    (state) => {
      const a = domainSnapshot('a');
      a.slots[0]!.state = state;
      expect(routeTargets(snapshot(a)).active).toMatchObject({ eligible: false, weight: 0 });
      expect(ineligibility(a, 'llama')).toBe(`model "llama" on domain a is ${state}`);
    },
  );

  it('keeps a degraded active and a not yet observed (starting) slot eligible', () => {
    const a = domainSnapshot('a', { state: 'degraded' });
    a.slots[0]!.state = 'starting';
    expect(routeTargets(snapshot(a)).active).toMatchObject({ eligible: true, weight: 100 });
    expect(ineligibility(a, 'llama')).toBeNull();
  });

  it('has no active target without an active domain', () => {
    expect(routeTargets({ ...snapshot(), activeDomainId: null })).toMatchObject({ active: null, standbys: [{}, {}] });
  });

  it('expects a failover after the detection and the training stop grace, in whole seconds, at least 1', () => {
    expect(
      expectedFailoverSeconds({ failureThreshold: 3, heartbeatIntervalMs: 500, trainingStopGraceMs: 10_000 }),
    ).toBe(12);
    expect(expectedFailoverSeconds({ failureThreshold: 1, heartbeatIntervalMs: 10, trainingStopGraceMs: 10 })).toBe(1);
  });
});
