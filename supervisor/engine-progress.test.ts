import {
  type EngineReading,
  type EngineRecord,
  isProbeDue,
  judgeEngine,
  newEngineRecord,
  observeReading,
  probeEnded,
  probeStarted,
  readingOf,
} from './engine-progress';
import { parsePrometheusText } from './prometheus-text';

const WEDGE_MS = 10_000;

/** A reading at `atMs` with `generated` tokens; the other progress metrics fixed unless given. */
const reading = (
  atMs: number,
  over: { running?: number; waiting?: number; generated?: number; kv?: number } = {},
): EngineReading => ({
  atMs,
  running: over.running ?? 0,
  waiting: over.waiting ?? 0,
  generatedTokens: over.generated ?? 100,
  progress: [over.generated ?? 100, 50, 10, over.kv ?? 0.1],
});

/** Feeds the readings in order. */
const observeAll = (readings: EngineReading[], record = newEngineRecord()): EngineRecord =>
  readings.reduce(observeReading, record);

/** One reading a second from `fromMs` for `seconds`, each from `at(i)`. */
const everySecond = (seconds: number, at: (i: number) => Parameters<typeof reading>[1], fromMs = 0) =>
  Array.from({ length: seconds + 1 }, (_, i) => reading(fromMs + i * 1_000, at(i)));

describe('judgeEngine: requests in the engine', () => {
  it('never wedges a busy engine whose tokens still flow, however slowly, and never probes it', () => {
    // Saturated: 8 running, 16 waiting, one token a second for a minute.
    let record = newEngineRecord();
    for (const r of everySecond(60, (i) => ({ running: 8, waiting: 16, generated: 100 + i }))) {
      record = observeReading(record, r);
      expect(judgeEngine(record, WEDGE_MS)).toBeNull();
      expect(isProbeDue(record, r.atMs, WEDGE_MS)).toBe(false);
    }
  });

  it('wedges an engine holding requests whose progress metrics stand still for the window, not sooner', () => {
    const stalled = (seconds: number) => observeAll(everySecond(seconds, () => ({ running: 3, waiting: 1 })));
    expect(judgeEngine(stalled(9), WEDGE_MS)).toBeNull();
    expect(judgeEngine(stalled(10), WEDGE_MS)).toEqual({
      condition: 'wedged',
      message: 'engine wedged: 3 running, 1 waiting, vllm:generation_tokens_total 100, unchanged for 10.0 s',
    });
  });

  it('counts the window from the last progress, and from the first request after an idle spell', () => {
    const moving = everySecond(5, (i) => ({ running: 1, generated: 100 + i }));
    const stuck = everySecond(9, () => ({ running: 1, generated: 106 }), 6_000);
    expect(judgeEngine(observeAll([...moving, ...stuck]), WEDGE_MS)).toBeNull(); // 9 s since 6 s
    const idleThenStuck = [...everySecond(20, () => ({})), ...everySecond(9, () => ({ running: 2 }), 21_000)];
    expect(judgeEngine(observeAll(idleThenStuck), WEDGE_MS)).toBeNull();
  });

  it('never wedges a lone long prefill: no token yet, but the KV cache fills chunk by chunk', () => {
    const prefill = everySecond(30, (i) => ({ running: 1, kv: 0.1 + i / 100 }));
    expect(judgeEngine(observeAll(prefill), WEDGE_MS)).toBeNull();
  });

  it('clears the verdict at the first progress', () => {
    const wedged = observeAll(everySecond(12, () => ({ running: 2 })));
    expect(judgeEngine(wedged, WEDGE_MS)?.condition).toBe('wedged');
    const moved = observeReading(wedged, reading(13_000, { running: 2, generated: 101 }));
    expect(judgeEngine(moved, WEDGE_MS)).toBeNull();
  });
});

describe('judgeEngine: the synthetic completion of an idle engine', () => {
  const idle = observeAll(everySecond(5, () => ({})));

  it('is due once the engine showed no progress for half the window, on a fresh reading of no request', () => {
    expect(isProbeDue(observeAll(everySecond(4, () => ({}))), 4_000, WEDGE_MS)).toBe(false);
    expect(isProbeDue(idle, 5_000, WEDGE_MS)).toBe(true);
    expect(isProbeDue(idle, 10_001, WEDGE_MS)).toBe(false); // the reading is too old to say idle
    const withRequest = observeReading(idle, reading(5_000, { running: 1 }));
    expect(isProbeDue(withRequest, 5_000, WEDGE_MS)).toBe(false);
    const started = probeStarted(idle, 5_000);
    expect(isProbeDue(started, 5_500, WEDGE_MS)).toBe(false); // one at a time
    const answered = probeEnded(started, { kind: 'answered', status: 200, detail: 'HTTP 200', atMs: 5_100 });
    expect(isProbeDue(observeReading(answered, reading(6_000, { generated: 101 })), 9_000, WEDGE_MS)).toBe(false);
  });

  it('wedges an engine that left it unanswered with no progress until a reading after it', () => {
    const timedOut = probeEnded(probeStarted(idle, 5_000), { kind: 'timeout', atMs: 10_000 });
    // A reading started before the end says nothing of the time after it.
    expect(judgeEngine(observeReading(timedOut, reading(9_500)), WEDGE_MS)).toBeNull();
    const after = observeReading(observeReading(timedOut, reading(9_500)), reading(10_100));
    expect(judgeEngine(after, WEDGE_MS)).toEqual({
      condition: 'wedged',
      message:
        'engine wedged: a synthetic completion (max_tokens 1) unanswered for 5.0 s and no progress since ' +
        '(0 running, 0 waiting, vllm:generation_tokens_total 100)',
    });
    // Wedged until progress shows or a synthetic completion is answered.
    expect(isProbeDue(after, 15_000, WEDGE_MS)).toBe(true); // still probed, to see it recover
    const nextProbe = probeStarted(after, 15_000);
    const ok = probeEnded(nextProbe, { kind: 'answered', status: 200, detail: 'HTTP 200', atMs: 15_200 });
    expect(judgeEngine(ok, WEDGE_MS)).toBeNull();
  });

  it('lets an unanswered one go when the engine made progress meanwhile (a burst of traffic took it)', () => {
    const timedOut = probeEnded(probeStarted(idle, 5_000), { kind: 'timeout', atMs: 10_000 });
    const busy = observeReading(timedOut, reading(10_100, { running: 8, generated: 180 }));
    expect(judgeEngine(busy, WEDGE_MS)).toBeNull();
    expect(busy.unanswered).toBeNull();
  });

  it('makes an engine erroring at the second 5xx in a row, sent at once after the first; 2xx clears it', () => {
    const error = (record: EngineRecord, atMs: number, status = 500) =>
      probeEnded(probeStarted(record, atMs), { kind: 'answered', status, detail: `HTTP ${status}: boom`, atMs });
    const once = observeReading(error(idle, 5_000), reading(5_500));
    expect(judgeEngine(once, WEDGE_MS)).toBeNull();
    expect(isProbeDue(once, 5_500, WEDGE_MS)).toBe(true);
    const twice = observeReading(error(once, 5_500), reading(6_000));
    expect(judgeEngine(twice, WEDGE_MS)).toEqual({
      condition: 'erroring',
      message: 'engine erroring: a synthetic completion answered HTTP 500: boom 2 times in a row',
    });
    expect(isProbeDue(twice, 6_000, WEDGE_MS)).toBe(false); // confirmed: back to the interval
    expect(judgeEngine(error(twice, 6_500, 404), WEDGE_MS)?.condition).toBe('erroring'); // a 4xx says nothing
    expect(judgeEngine(error(twice, 6_500, 200), WEDGE_MS)).toBeNull();
  });

  it('takes a refused or reset synthetic completion as no evidence about the engine', () => {
    const failed = probeEnded(probeStarted(idle, 5_000), { kind: 'failed', atMs: 5_010 });
    expect(judgeEngine(observeReading(failed, reading(6_000)), WEDGE_MS)).toBeNull();
  });
});

describe('readingOf', () => {
  it("reads vLLM's metric names, summed over engines, the KV gauge under its new or its old name", () => {
    const text = (kv: string) => `
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 99.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 7.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 3.0
${kv}{engine="0",model_name="m"} 0.25
`;
    const expected = { atMs: 5, running: 3, waiting: 4, generatedTokens: 1234, progress: [1234, 99, 10, 0.25] };
    expect(readingOf(parsePrometheusText(text('vllm:kv_cache_usage_perc')), 5)).toEqual(expected);
    expect(readingOf(parsePrometheusText(text('vllm:gpu_cache_usage_perc')), 5)).toEqual(expected);
    expect(readingOf([], 5)).toEqual({
      atMs: 5,
      running: 0,
      waiting: 0,
      generatedTokens: null,
      progress: [null, null, null, null],
    });
  });
});
