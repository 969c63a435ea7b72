import type { DomainState } from '../schemas/enums';
import { operationTargetProblem, type OperationTargetInput, type TargetDomain } from './operation-target';

const fleet = { slug: 'f', activeDomainId: 'east-id' };
const domain = (slug: string, over: Partial<TargetDomain> = {}): TargetDomain => ({
  id: `${slug}-id`,
  slug,
  state: 'ready',
  slots: [{ kind: 'inference', models: [{ name: 'm' }] }, { kind: 'training' }],
  ...over,
});
const check = (over: Partial<OperationTargetInput>) =>
  operationTargetProblem({
    moment: 'request',
    kind: 'promote',
    fleet,
    targetRef: 'west',
    target: domain('west'),
    ...over,
  });

describe('operationTargetProblem', () => {
  it('accepts a ready or degraded standby that serves a model, at every moment, for either kind', () => {
    for (const moment of ['request', 'insert', 'begin'] as const) {
      for (const kind of ['promote', 'demote'] as const) {
        expect(check({ moment, kind })).toBeNull();
        expect(check({ moment, kind, target: domain('west', { state: 'degraded' }) })).toBeNull();
      }
    }
  });

  it('refuses a domain outside the fleet at every moment, naming it as the caller did', () => {
    for (const moment of ['request', 'insert', 'begin'] as const) {
      expect(check({ moment, target: null, targetRef: 'nowhere' })).toEqual({
        code: 'not_in_fleet',
        message: 'domain nowhere is not in fleet f',
      });
    }
  });

  it('refuses a promotion of a domain with no inference model at every moment; a demotion needs none', () => {
    const trainingOnly = domain('west', { slots: [{ kind: 'training' }] });
    const emptySlot = domain('west', { slots: [{ kind: 'inference', models: [] }] });
    for (const moment of ['request', 'insert', 'begin'] as const) {
      expect(check({ moment, target: trainingOnly })?.code).toBe('no_inference_models');
      expect(check({ moment, target: emptySlot })).toEqual({
        code: 'no_inference_models',
        message: 'domain west has no inference models',
      });
      expect(check({ moment, kind: 'demote', target: trainingOnly })).toBeNull();
    }
  });

  it('refuses the active where the pointer is read (request, begin), never at insert', () => {
    const east = domain('east');
    const active = { code: 'is_active', message: 'domain east is the active domain of fleet f' };
    for (const kind of ['promote', 'demote'] as const) {
      expect(check({ moment: 'request', kind, target: east })).toEqual(active);
      expect(check({ moment: 'begin', kind, target: east })).toEqual(active);
      expect(check({ moment: 'insert', kind, target: east })).toBeNull();
    }
  });

  it('accepts the active at begin for a promotion that already committed it, never for a demotion', () => {
    const east = domain('east');
    expect(check({ moment: 'begin', target: east, isRoutingCommitted: true })).toBeNull();
    expect(check({ moment: 'begin', kind: 'demote', target: east, isRoutingCommitted: true })?.code).toBe('is_active');
    expect(check({ moment: 'request', target: east, isRoutingCommitted: true })?.code).toBe('is_active');
  });

  it('refuses a domain that is not ready or degraded only at request', () => {
    for (const state of ['provisioning', 'failed', 'stopping', 'stopped'] as DomainState[]) {
      expect(check({ target: domain('west', { state }) })).toEqual({
        code: 'not_ready',
        message: `domain west is ${state}; only a ready or degraded domain can be targeted`,
      });
      expect(check({ moment: 'insert', target: domain('west', { state }) })).toBeNull();
      expect(check({ moment: 'begin', target: domain('west', { state }) })).toBeNull();
    }
  });
});
