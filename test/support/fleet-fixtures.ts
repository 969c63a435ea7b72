/** Fixed ids and a domain snapshot builder for activity and observation tests (active `a`, standby `b`). */
import type { DomainSnapshot } from '../../schemas/entities';

export const T0 = '2030-01-01T00:00:00.000Z';
export const IDS = {
  fleet: '10000000-0000-4000-8000-000000000001',
  a: '10000000-0000-4000-8000-00000000000a',
  b: '10000000-0000-4000-8000-00000000000b',
  aInference: '10000000-0000-4000-8000-0000000000a1',
  aTraining: '10000000-0000-4000-8000-0000000000a2',
  bInference: '10000000-0000-4000-8000-0000000000b1',
  bTraining: '10000000-0000-4000-8000-0000000000b2',
} as const;

/** A domain with GPU 0 running model `llama` (level-1 sleep) and a trainer. */
export function domainSnapshot(which: 'a' | 'b', overrides: Partial<DomainSnapshot> = {}): DomainSnapshot {
  const id = IDS[which];
  return {
    id,
    fleetId: IDS.fleet,
    slug: which === 'a' ? 'east' : 'west',
    displayName: which,
    provider: 'static',
    placement: {},
    supervisorUrl: `http://supervisor-${which}/`,
    servingBaseUrl: null,
    launch: null,
    state: 'ready',
    stateChangedAt: T0,
    lastSeenAt: T0,
    consecutiveFailures: 0,
    lastError: null,
    isActive: which === 'a',
    slots: [
      {
        id: which === 'a' ? IDS.aInference : IDS.bInference,
        domainId: id,
        gpuIndex: 0,
        stateChangedAt: T0,
        kind: 'inference',
        state: which === 'a' ? 'serving' : 'sleeping',
        sleepLevel: 1,
        models: [{ name: 'llama', servingUrl: `http://vllm-${which}/v1` }],
      },
      {
        id: which === 'a' ? IDS.aTraining : IDS.bTraining,
        domainId: id,
        gpuIndex: 0,
        stateChangedAt: T0,
        kind: 'training',
        state: which === 'a' ? 'idle' : 'training',
        command: ['train'],
        checkpointDir: '/ckpt',
        env: {},
      },
    ],
    ...overrides,
  };
}
