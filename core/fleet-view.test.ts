import type { FleetSnapshot } from '../schemas/entities';
import { ID, policy } from './fleet-fixtures';
import { activeDomainOf, toFleetView } from './fleet-view';

const T = '2030-01-01T00:00:00.000Z';
const snapshot = (): FleetSnapshot => ({
  id: ID.fleet,
  slug: 'prod',
  displayName: 'Prod',
  activeDomainId: ID.a,
  routeRevision: 4,
  policy: policy(),
  createdAt: T,
  updatedAt: T,
  inFlightOperation: null,
  domains: [
    {
      id: ID.a,
      fleetId: ID.fleet,
      slug: 'a',
      displayName: 'A',
      provider: 'static',
      placement: {},
      supervisorUrl: 'http://127.0.0.1:1',
      servingBaseUrl: null,
      launch: null,
      state: 'ready',
      stateChangedAt: T,
      lastSeenAt: T,
      consecutiveFailures: 0,
      lastError: null,
      isActive: true,
      slots: [
        {
          id: ID.op,
          domainId: ID.a,
          gpuIndex: 1,
          stateChangedAt: T,
          kind: 'training',
          state: 'training',
          command: ['train'],
          checkpointDir: '/ckpt',
          env: {},
        },
        {
          id: ID.c,
          domainId: ID.a,
          gpuIndex: 0,
          stateChangedAt: T,
          kind: 'inference',
          state: 'serving',
          sleepLevel: 1,
          models: [
            { name: 'qwen', servingUrl: 'http://127.0.0.1:2' },
            { name: 'llama', servingUrl: 'http://127.0.0.1:3' },
          ],
        },
      ],
    },
  ],
});

describe('toFleetView', () => {
  it('keeps what decisions read: sorted model names and training GPUs, slot states, the in-flight operation', () => {
    const view = toFleetView(snapshot());
    expect(view).toEqual({
      id: ID.fleet,
      slug: 'prod',
      activeDomainId: ID.a,
      routeRevision: 4,
      inFlightOperation: null,
      domains: [
        {
          id: ID.a,
          slug: 'a',
          state: 'ready',
          provider: 'static',
          stateChangedAt: T,
          lastSeenAt: T,
          consecutiveFailures: 0,
          lastError: null,
          modelNames: ['llama', 'qwen'],
          trainingGpus: [1],
          slots: [
            { kind: 'inference', gpuIndex: 0, state: 'serving' },
            { kind: 'training', gpuIndex: 1, state: 'training' },
          ],
        },
      ],
    });
    expect(activeDomainOf(view)?.slug).toBe('a');
  });

  it('returns no active domain for an unset pointer', () => {
    expect(activeDomainOf({ ...toFleetView(snapshot()), activeDomainId: null })).toBeNull();
  });
});
