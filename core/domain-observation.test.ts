import type { SupervisorStatus } from '../schemas/supervisor';
import {
  MISSED_ANSWER_WINDOW_MS,
  missedAnswerProblem,
  nextDomainState,
  observeDomain,
  recoversFailedActive,
} from './domain-observation';
import { domainSnapshot, ID, NOW } from './fleet-fixtures';

const T0 = NOW.toISOString();

const status = (over: Partial<SupervisorStatus> = {}): SupervisorStatus => ({
  models: [{ name: 'llama', gpuIndex: 0, port: 1, state: 'asleep', runningRequests: 0, error: null }],
  training: [{ gpuIndex: 0, state: 'running', pids: [9], startedAt: T0, lastExit: null }],
  at: T0,
  ...over,
});

describe('observeDomain', () => {
  it('calls a standby with every model asleep and training running ready, with no slot changes', () => {
    expect(observeDomain(domainSnapshot('b'), false, status())).toEqual({
      state: 'ready',
      problems: [],
      slotChanges: [],
    });
  });

  it('degrades the active when a model is asleep', () => {
    const o = observeDomain(domainSnapshot('a'), true, status({ training: [] }));
    expect(o.state).toBe('degraded');
    expect(o.problems).toEqual(['model llama is asleep on the active']);
    expect(o.slotChanges).toEqual([{ slotId: ID.aInference, to: 'sleeping' }]);
  });

  it('keeps a domain ready when a model is busy: unknown state from slow admin endpoints is no problem', () => {
    const busy = status({
      models: [
        {
          name: 'llama',
          gpuIndex: 0,
          port: 1,
          state: 'unknown',
          runningRequests: null,
          error: 'GET /is_sleeping on port 1 unanswered for 4000 ms',
          condition: 'busy',
        },
      ],
    });
    expect(observeDomain(domainSnapshot('a'), true, busy).problems).toEqual([]);
    const gone = status({ models: [{ ...busy.models[0]!, condition: 'gone' }] });
    expect(observeDomain(domainSnapshot('a'), true, gone).state).toBe('degraded');
  });

  it('degrades a domain with a model in state unknown or not reported', () => {
    const unknown = status({
      models: [{ name: 'llama', gpuIndex: 0, port: 1, state: 'unknown', runningRequests: null, error: 'ECONNREFUSED' }],
    });
    expect(observeDomain(domainSnapshot('b'), false, unknown).problems).toEqual([
      'model llama state unknown: ECONNREFUSED',
    ]);
    expect(observeDomain(domainSnapshot('b'), false, status({ models: [] })).problems).toEqual([
      'model llama is not reported',
    ]);
  });

  it('maps training runs onto slot states: crashed runs are failed, stopped ones idle', () => {
    const crashed = status({
      training: [
        { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: { code: 1, signal: null, at: T0 } },
      ],
    });
    expect(observeDomain(domainSnapshot('b'), false, crashed).slotChanges).toEqual([
      { slotId: ID.bTraining, to: 'failed' },
    ]);
    const stopped = status({
      training: [
        { gpuIndex: 0, state: 'idle', pids: [], startedAt: null, lastExit: { code: null, signal: 'SIGTERM', at: T0 } },
      ],
    });
    expect(observeDomain(domainSnapshot('b'), false, stopped).slotChanges).toEqual([
      { slotId: ID.bTraining, to: 'idle' },
    ]);
  });

  it('reports an awake active as ready with its slot serving', () => {
    const awake = status({
      models: [{ name: 'llama', gpuIndex: 0, port: 1, state: 'awake', runningRequests: 4, error: null }],
      training: [],
    });
    expect(observeDomain(domainSnapshot('a'), true, awake)).toEqual({ state: 'ready', problems: [], slotChanges: [] });
  });

  it('degrades an active its supervisor calls healthy when the proxy gets no answer from it', () => {
    const awake = status({
      models: [{ name: 'llama', gpuIndex: 0, port: 1, state: 'awake', runningRequests: 0, error: null }],
      training: [],
    });
    const missed = 'connect timeout to 10.0.0.9:8000';
    const o = observeDomain(domainSnapshot('a'), true, awake, missedAnswerProblem({ atMs: 0, why: missed }, 1_000));
    expect(o.state).toBe('degraded');
    expect(o.problems).toEqual([`the proxy gets no answer from it: ${missed}`]);
    // A standby gets no traffic: a late miss from before a failover says nothing about it.
    expect(observeDomain(domainSnapshot('b'), false, status(), 'the proxy gets no answer from it: x').state).toBe(
      'ready',
    );
  });
});

describe('missedAnswerProblem', () => {
  it('holds a missed answer against the active for the window, and nothing without one', () => {
    const missed = { atMs: 1_000, why: 'connection refused' };
    expect(missedAnswerProblem(missed, 1_000)).toBe('the proxy gets no answer from it: connection refused');
    expect(missedAnswerProblem(missed, 1_000 + MISSED_ANSWER_WINDOW_MS)).not.toBeNull();
    expect(missedAnswerProblem(missed, 1_001 + MISSED_ANSWER_WINDOW_MS)).toBeNull();
    expect(missedAnswerProblem(null, 1_000)).toBeNull();
  });
});

describe('nextDomainState', () => {
  it('follows the observation between ready and degraded', () => {
    expect(nextDomainState('ready', true, 'degraded')).toBe('degraded');
    expect(nextDomainState('degraded', false, 'ready')).toBe('ready');
    expect(nextDomainState('ready', false, 'ready')).toBeNull();
  });
  it('recovers a failed standby but never a failed active', () => {
    expect(nextDomainState('failed', false, 'ready')).toBe('ready');
    expect(nextDomainState('failed', true, 'ready')).toBeNull();
  });
  it.each(['stopping', 'stopped'] as const)('leaves a %s domain alone', (state) => {
    expect(nextDomainState(state, false, 'ready')).toBeNull();
  });
  it('provisions a static domain with its first answer, and leaves a provisioned one to its workflow', () => {
    expect(nextDomainState('provisioning', false, 'ready', 'static')).toBe('ready');
    expect(nextDomainState('provisioning', true, 'degraded', 'static')).toBe('degraded');
    expect(nextDomainState('provisioning', false, 'ready', 'skypilot')).toBeNull();
    expect(nextDomainState('provisioning', false, 'ready', 'skyserve')).toBeNull();
  });
});

describe('recoversFailedActive', () => {
  it('recovers a failed active only after healthy answers for the whole grace', () => {
    expect(recoversFailedActive('ready', 1_000, 30_999, 30_000)).toBe(false);
    expect(recoversFailedActive('ready', 1_000, 31_000, 30_000)).toBe(true);
    expect(recoversFailedActive('degraded', 1_000, 60_000, 30_000)).toBe(false);
  });
});
