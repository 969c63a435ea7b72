import type { DomainSnapshot } from '../schemas/entities';
import { defaultFleetPolicy, type FleetPolicy } from '../schemas/policy';
import type { DomainView, FleetView, OperationView } from './fleet-view';

/** Test builders for `core/` (fixed ids, overridable). Not used by production code. */

export const NOW = new Date('2030-01-01T00:00:00.000Z');
export const ago = (ms: number): string => new Date(NOW.getTime() - ms).toISOString();

export const ID = {
  fleet: '00000000-0000-4000-8000-000000000001',
  a: '00000000-0000-4000-8000-00000000000a',
  b: '00000000-0000-4000-8000-00000000000b',
  c: '00000000-0000-4000-8000-00000000000c',
  op: '00000000-0000-4000-8000-0000000000f1',
  aInference: '00000000-0000-4000-8000-0000000000a1',
  aTraining: '00000000-0000-4000-8000-0000000000a2',
  bInference: '00000000-0000-4000-8000-0000000000b1',
  bTraining: '00000000-0000-4000-8000-0000000000b2',
} as const;

export const policy = (overrides: Partial<FleetPolicy> = {}): FleetPolicy => ({
  ...defaultFleetPolicy(),
  ...overrides,
});

export const domain = (overrides: Partial<DomainView> = {}): DomainView => ({
  id: ID.a,
  slug: 'a',
  state: 'ready',
  stateChangedAt: ago(60_000),
  lastSeenAt: ago(100),
  consecutiveFailures: 0,
  lastError: null,
  modelNames: ['llama'],
  trainingGpus: [0],
  ...overrides,
});

export const operation = (overrides: Partial<OperationView> = {}): OperationView => ({
  id: ID.op,
  kind: 'promote',
  state: 'running',
  targetDomainId: ID.b,
  createdAt: ago(1_000),
  ...overrides,
});

/** A fleet with active `a` and standby `b` (both healthy), plus any extra domains. */
export const fleet = (overrides: Partial<FleetView> = {}): FleetView => ({
  id: ID.fleet,
  slug: 'prod',
  activeDomainId: ID.a,
  routeRevision: 1,
  domains: [domain(), domain({ id: ID.b, slug: 'b' })],
  inFlightOperation: null,
  ...overrides,
});

/** A stored domain `a` (active: model serving, trainer idle) or `b` (standby: model asleep, trainer running) on GPU 0. */
export function domainSnapshot(which: 'a' | 'b', overrides: Partial<DomainSnapshot> = {}): DomainSnapshot {
  const at = NOW.toISOString();
  const isA = which === 'a';
  return {
    id: ID[which],
    fleetId: ID.fleet,
    slug: which,
    displayName: which,
    provider: 'static',
    placement: {},
    supervisorUrl: `http://supervisor-${which}/`,
    servingBaseUrl: null,
    launch: null,
    state: 'ready',
    stateChangedAt: at,
    lastSeenAt: at,
    consecutiveFailures: 0,
    lastError: null,
    isActive: isA,
    slots: [
      {
        id: isA ? ID.aInference : ID.bInference,
        domainId: ID[which],
        gpuIndex: 0,
        stateChangedAt: at,
        kind: 'inference',
        state: isA ? 'serving' : 'sleeping',
        sleepLevel: 1,
        models: [{ name: 'llama', servingUrl: `http://vllm-${which}/v1` }],
      },
      {
        id: isA ? ID.aTraining : ID.bTraining,
        domainId: ID[which],
        gpuIndex: 0,
        stateChangedAt: at,
        kind: 'training',
        state: isA ? 'idle' : 'training',
        command: ['train'],
        checkpointDir: '/ckpt',
        env: {},
      },
    ],
    ...overrides,
  };
}
