import type { ModelStatus, SupervisorStatus } from '../schemas/supervisor';
import { policy } from './fleet-fixtures';
import {
  ANSWER_WAIT_FLOOR_MS,
  answerWaitMs,
  judgePoll,
  type PollEvidence,
  pollTimeoutMs,
  WATCHER_LAG_SHARE,
} from './poll-verdict';

const P = policy({ heartbeatIntervalMs: 500, heartbeatStaleMs: 5_000 });
const POLLED_AT = 1_000_000;

const model = (over: Partial<ModelStatus> = {}): ModelStatus => ({
  name: 'llama',
  gpuIndex: 0,
  port: 8000,
  state: 'awake',
  runningRequests: 4,
  waitingRequests: 0,
  error: null,
  stateAgeMs: 200,
  requestsAgeMs: 200,
  condition: 'ready',
  processes: { pids: [41, 42], stoppedPids: [], healthOk: true, pidsAgeMs: 0, healthAgeMs: 200 },
  ...over,
});
const answered = (...models: ModelStatus[]): PollEvidence['outcome'] => ({
  kind: 'answered',
  status: { models, training: [], at: new Date(POLLED_AT).toISOString() } satisfies SupervisorStatus,
});
const evidence = (outcome: PollEvidence['outcome'], lastServedAnswerAtMs: number | null = null): PollEvidence => ({
  outcome,
  models: ['llama'],
  lastServedAnswerAtMs,
  polledAtMs: POLLED_AT,
});
/** Admin endpoints answering in 2-30 s: the status view holds the model busy with its last confirmed state. */
const slowAdmin = model({
  condition: 'busy',
  stateAgeMs: 12_000,
  requestsAgeMs: 12_000,
  error: 'GET /is_sleeping on port 8000 unanswered for 12000 ms',
  processes: { pids: [41, 42], stoppedPids: [], healthOk: null, pidsAgeMs: 0, healthAgeMs: 12_000 },
});

describe('judgePoll', () => {
  it('passes a quick answer on the status alone', () => {
    expect(judgePoll(evidence(answered(model())), P)).toEqual({
      isFailed: false,
      evidence: 'status',
      busyModels: [],
      message: null,
    });
  });

  it('passes slow admin endpoints with traffic flowing: the model is busy, not failed', () => {
    const verdict = judgePoll(evidence(answered(slowAdmin), POLLED_AT - 100), P);
    expect(verdict).toEqual({ isFailed: false, evidence: 'status', busyModels: ['llama'], message: null });
  });

  it('passes slow admin endpoints with no traffic: live processes keep the model busy, not failed', () => {
    const verdict = judgePoll(evidence(answered(slowAdmin), null), P);
    expect(verdict).toEqual({ isFailed: false, evidence: 'status', busyModels: ['llama'], message: null });
  });

  it('fails a poll whose model process is gone (refused, nothing serving its port)', () => {
    const gone = model({
      condition: 'gone',
      state: 'unknown',
      processes: { pids: [], stoppedPids: [], healthOk: false, pidsAgeMs: 0, healthAgeMs: 0 },
    });
    expect(judgePoll(evidence(answered(gone)), P)).toEqual({
      isFailed: true,
      evidence: 'process_gone',
      busyModels: [],
      message: 'model llama: no process serves the port and it refuses connections',
    });
  });

  it('fails a poll whose model processes are frozen (SIGSTOP), even with a recent relayed answer', () => {
    const frozen = model({
      condition: 'frozen',
      processes: { pids: [41, 42], stoppedPids: [41, 42], healthOk: null, pidsAgeMs: 0, healthAgeMs: 3_000 },
    });
    expect(judgePoll(evidence(answered(frozen), POLLED_AT - 50), P)).toMatchObject({
      isFailed: true,
      evidence: 'frozen',
      message: 'model llama: every process stopped (pids 41, 42)',
    });
  });

  it('fails a poll whose model engine is wedged or erroring, even with a recent relayed answer', () => {
    const wedged = model({ condition: 'wedged', error: 'engine wedged: 2 running, 0 waiting, unchanged for 10.0 s' });
    expect(judgePoll(evidence(answered(wedged), POLLED_AT - 50), P)).toEqual({
      isFailed: true,
      evidence: 'engine_stuck',
      busyModels: [],
      message: 'model llama: engine wedged: 2 running, 0 waiting, unchanged for 10.0 s',
    });
    const erroring = model({ condition: 'erroring', error: null });
    expect(judgePoll(evidence(answered(erroring)), P)).toMatchObject({
      isFailed: true,
      evidence: 'engine_stuck',
      message: 'model llama: erroring',
    });
  });

  it('fails an unreachable host, and a frozen host whose supervisor times out, without traffic', () => {
    const refused = judgePoll(evidence({ kind: 'unreachable', error: 'connect ECONNREFUSED' }), P);
    expect(refused).toEqual({
      isFailed: true,
      evidence: 'supervisor_unreachable',
      busyModels: [],
      message: 'connect ECONNREFUSED',
    });
    const frozenHost = judgePoll(evidence({ kind: 'timeout', error: 'timed out after 1000 ms' }), P);
    expect(frozenHost).toMatchObject({ isFailed: true, evidence: 'supervisor_timeout' });
  });

  it('passes an unanswered poll on an answer relayed while it waited; one relayed before it was sent is no pass', () => {
    const timeout = { kind: 'timeout' as const, error: 'timed out after 1000 ms' };
    expect(judgePoll(evidence(timeout, POLLED_AT), P)).toEqual({
      isFailed: false,
      evidence: 'served_answer',
      busyModels: [],
      message: null,
    });
    expect(judgePoll(evidence(timeout, POLLED_AT + 150), P).evidence).toBe('served_answer');
    // Relayed a moment before the poll: the host may have gone dark since; the poll counts (from that sighting).
    expect(judgePoll(evidence(timeout, POLLED_AT - 1), P)).toMatchObject({
      isFailed: true,
      evidence: 'supervisor_timeout',
    });
  });

  it('holds a timeout against nobody when the watcher stalled for a quarter of the wait, and only then', () => {
    const timeout = { kind: 'timeout' as const, error: 'timed out after 1000 ms' };
    const window = pollTimeoutMs(P);
    const lagged = (watcherLagMs: number) => judgePoll({ ...evidence(timeout), watcherLagMs }, P);
    expect(lagged(window * WATCHER_LAG_SHARE)).toEqual({
      isFailed: false,
      evidence: 'watcher_lag',
      busyModels: [],
      message: null,
    });
    expect(lagged(3_000).evidence).toBe('watcher_lag');
    expect(lagged(window * WATCHER_LAG_SHARE - 1)).toMatchObject({ isFailed: true, evidence: 'supervisor_timeout' });
  });

  it('fails a refused connection whatever the watcher lag: refusal is the host speaking', () => {
    const refused = { kind: 'unreachable' as const, error: 'connect ECONNREFUSED 127.0.0.2:8081' };
    expect(judgePoll({ ...evidence(refused), watcherLagMs: 3_000 }, P)).toMatchObject({
      isFailed: true,
      evidence: 'supervisor_unreachable',
    });
  });

  it('reads an older supervisor (no condition) as before: an answer is a success', () => {
    const old = model({ state: 'unknown', error: 'timed out', condition: undefined, processes: undefined });
    expect(judgePoll(evidence(answered(old)), P)).toMatchObject({ isFailed: false, evidence: 'status' });
  });

  it('judges only the layout models of the domain', () => {
    const other = model({ name: 'other', condition: 'gone' });
    expect(judgePoll(evidence(answered(model(), other)), P).isFailed).toBe(false);
  });

  it('bounds the poll timeout by twice the interval, 1 s and the stale limit', () => {
    expect(pollTimeoutMs({ heartbeatIntervalMs: 250, heartbeatStaleMs: 5_000 })).toBe(1_000);
    expect(pollTimeoutMs({ heartbeatIntervalMs: 2_000, heartbeatStaleMs: 5_000 })).toBe(4_000);
    expect(pollTimeoutMs({ heartbeatIntervalMs: 2_000, heartbeatStaleMs: 3_000 })).toBe(3_000);
  });

  it('waits for an answer three times the slowest recent one, at least 200 ms, at most the poll interval', () => {
    expect(answerWaitMs({ heartbeatIntervalMs: 500 }, [])).toBe(500); // nothing measured yet: the whole interval
    expect(answerWaitMs({ heartbeatIntervalMs: 500 }, [3, 5, 4])).toBe(ANSWER_WAIT_FLOOR_MS);
    // A region away: 120 ms answers are waited for 360 ms, not counted silent at 200.
    expect(answerWaitMs({ heartbeatIntervalMs: 500 }, [80, 120, 90])).toBe(360);
    expect(answerWaitMs({ heartbeatIntervalMs: 500 }, [400])).toBe(500);
    expect(answerWaitMs({ heartbeatIntervalMs: 150 }, [])).toBe(150);
  });

  it("weighs the watcher's stall against the poll's own wait, not the request's timeout", () => {
    const silent = { kind: 'timeout' as const, error: 'supervisor: no answer within 200 ms of the poll' };
    // 60 ms of a 200 ms wait: the answer may have sat unread, so the interval is held against nobody.
    expect(judgePoll({ ...evidence(silent), watcherLagMs: 60, waitedMs: 200 }, P).evidence).toBe('watcher_lag');
    expect(judgePoll({ ...evidence(silent), watcherLagMs: 30, waitedMs: 200 }, P)).toMatchObject({
      isFailed: true,
      evidence: 'supervisor_timeout',
    });
  });
});
