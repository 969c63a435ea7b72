import { setHolding } from '../gpu-state';
import { tokensAlreadyWritten } from './continuation';
import { metricsText } from './protocol';

export type MemoryTag = 'weights' | 'kv_cache';
export const MEMORY_TAGS: readonly MemoryTag[] = ['weights', 'kv_cache'];
/** What a wake may name: the memory tags, and `scheduling`, which resumes a level-0 sleep (vllm/v1/engine/core.py `wake_up`). */
export type WakeTag = MemoryTag | 'scheduling';
/** Sleep levels vLLM's engine core takes: 0 pauses scheduling only, no memory changes (vllm/v1/engine/core.py `sleep`). */
export type SleepLevel = 0 | 1 | 2;

const SENTENCE = 'This is a simulated reply from the Haru GPU host simulator, served by a fake vLLM engine.';
/** What the engine answers once its weights are wrong (the garbage-after-wake fault): other text, other scores. */
const GARBAGE = 'lorem vask quib dorn elth mip sarn kove trel un bisk oph gral zent wumo ferd yil.';

/** How a wake comes back broken (faults of the control file). */
export interface WakeFaults {
  /** Completions carry empty content once fully awake. */
  emptyAfter?: boolean;
  /** The engine answers from other weights once fully awake (until a wake without it): other text and logprobs. */
  garbageAfter?: boolean;
}

/** `text` as the simulated tokenizer splits it: each word with its leading whitespace. */
export const tokenize = (text: string): string[] => text.match(/\s*\S+/g) ?? [];

export interface EngineOptions {
  model: string;
  gpuIndex: number;
  /** Simulated GPU state dir; VRAM use is written there under this process's pid. */
  gpuStateDir?: string;
  weightsMiB: number;
  kvCacheMiB: number;
  /** What a sleeping engine keeps: its CUDA context and CUDA graph pools (vLLM's sleep frees weights and KV cache only). */
  residueMiB: number;
  startAsleep?: boolean;
  /** `--max-num-seqs`: requests scheduled at once; the rest wait (vLLM's default is 256). */
  maxNumSeqs?: number;
}

/** How a sleep treats requests in flight (vLLM's `PauseMode`, vllm/v1/engine/core.py `pause_scheduler`). */
export type SleepMode = 'abort' | 'wait';

/** One request's place in the engine: waiting until scheduled, then running until released. */
export interface Admission {
  /** Resolves once the request is scheduled: the engine is awake and has a free sequence slot. */
  scheduled: Promise<void>;
  /** True once a sleep in `abort` mode aborted it: it ends with `finish_reason: "abort"`. */
  isAborted(): boolean;
  /** Leaves the engine (idempotent); a request still waiting leaves the queue. */
  release(): void;
}

/**
 * The simulated engine behind one fake vLLM: sleep tags as vLLM's CuMemAllocator tracks them, whether the
 * weights are valid (a level-2 sleep discards them until `reload_weights`), counters for /metrics, and the
 * VRAM it holds, written to the GPU state on every change.
 */
export function createEngine(opts: EngineOptions) {
  const sleepingTags = new Set<MemoryTag>(opts.startAsleep ? MEMORY_TAGS : []);
  let sleepLevel: SleepLevel = opts.startAsleep ? 1 : 0;
  /** A sleep paused the scheduler (every level does); a wake resumes it. */
  let schedulerPaused = opts.startAsleep === true;
  /**
   * `vllm:engine_sleep_state` as vLLM records it: `record_sleep_state(1, level)` after a sleep and
   * `record_sleep_state(0, 0)` after any wake, partial ones included (vllm/v1/engine/async_llm.py `sleep`,
   * `wake_up`). So a `/wake_up?tags=weights` reads awake while `/is_sleeping` still says true.
   */
  let gauge: { asleep: boolean; level: SleepLevel } = { asleep: opts.startAsleep === true, level: sleepLevel };
  let weightsValid = true;
  let emptyAnswers = false;
  let garbageWeights = false;
  let running = 0;
  /** Requests waiting to be scheduled, oldest first (vLLM's scheduler `waiting` queue). */
  const waiting: (() => void)[] = [];
  /** Aborts of the requests running now. */
  const runningAborts = new Set<() => void>();
  /** A `wait`-mode sleep is draining: nothing new is scheduled. */
  let isPaused = false;
  let drained: (() => void) | null = null;
  const maxNumSeqs = opts.maxNumSeqs ?? 256;
  let generated = 0;
  let promptTokens = 0;
  let succeeded = 0;
  /**
   * `vllm:kv_cache_usage_perc`: set only when the engine steps (a token generated, a request finished), as vLLM
   * sets it from each step's scheduler stats, so a wedged engine's stays where it was.
   */
  let kvCacheUsage = 0;
  const setKvCacheUsage = (requests: number) => (kvCacheUsage = Math.min(1, Math.max(0, requests) / maxNumSeqs));

  /** The tokens the current weights prefer, in order: greedy decoding emits them, scoring favours them. */
  const preferredTokens = (): string[] => tokenize(garbageWeights || !weightsValid ? GARBAGE : SENTENCE);
  /** Starts waiting requests while the engine is awake, not draining, and has free sequence slots. */
  function schedule() {
    // Requests wait for the KV cache too: a partial wake leaves it unmapped (the newest vLLM resumes scheduling
    // only once every allocation is resident again).
    while (waiting.length > 0 && !schedulerPaused && sleepingTags.size === 0 && !isPaused && running < maxNumSeqs)
      waiting.shift()!();
  }

  function writeVram() {
    if (!opts.gpuStateDir) return;
    const used =
      opts.residueMiB +
      (sleepingTags.has('weights') ? 0 : opts.weightsMiB) +
      (sleepingTags.has('kv_cache') ? 0 : opts.kvCacheMiB);
    setHolding(opts.gpuStateDir, { gpuIndex: opts.gpuIndex, usedMiB: used, label: 'python3' });
  }

  return {
    writeVram,
    /** `/is_sleeping`: the scheduler paused or any memory asleep (vllm/v1/engine/core.py `is_sleeping`). */
    get sleeping() {
      return schedulerPaused || sleepingTags.size > 0;
    },
    /**
     * Sleeps at `level` as vLLM's `sleep(level, mode)` (vllm/v1/engine/async_llm.py -> engine core `sleep`, which
     * pauses the scheduler first, at every level): `abort` ends the requests running now with
     * `finish_reason: "abort"`; `wait` stops scheduling and waits for them to finish. Level 0 stops there; levels
     * 1 and 2 then release the memory (a no-op when it is already asleep, as vLLM's executor does). Requests that
     * arrive meanwhile wait in the queue until a wake.
     */
    async sleep(level: SleepLevel, mode: SleepMode = 'abort') {
      if (mode === 'abort') for (const abort of [...runningAborts]) abort();
      else if (running > 0) {
        isPaused = true;
        await new Promise<void>((resolve) => (drained = resolve));
        drained = null;
        isPaused = false;
      }
      schedulerPaused = true;
      gauge = { asleep: true, level };
      // Level 0 stops at the pause; an executor already asleep is left as it is (it only warns).
      if (level === 0 || sleepingTags.size > 0) return;
      for (const tag of MEMORY_TAGS) sleepingTags.add(tag);
      sleepLevel = level;
      if (level === 2) weightsValid = false; // discarded: garbage until reload_weights
      writeVram();
    },
    /**
     * Wakes `tags` (all when empty) and resumes scheduling, as vLLM's engine core `wake_up`: `scheduling` is no
     * memory tag and is dropped; a tag that is not asleep makes the executor skip the memory part (it only
     * warns, vllm/v1/executor/abstract.py `wake_up`). `faults` say how the engine comes back once fully awake.
     */
    wake(tags: WakeTag[], faults: WakeFaults = {}) {
      const memoryTags = tags.filter((t): t is MemoryTag => t !== 'scheduling');
      const onlyScheduling = tags.length > 0 && memoryTags.length === 0;
      const wasAsleep = sleepingTags.size > 0;
      if (!onlyScheduling && wasAsleep && memoryTags.every((t) => sleepingTags.has(t))) {
        for (const tag of memoryTags.length ? memoryTags : MEMORY_TAGS) sleepingTags.delete(tag);
        if (sleepingTags.size === 0) {
          sleepLevel = 0;
          if (faults.emptyAfter) emptyAnswers = true;
          // Each full wake decides afresh: the fault corrupts the wake it is set for, a later clean wake is healthy.
          garbageWeights = faults.garbageAfter === true;
        }
      }
      schedulerPaused = false;
      gauge = { asleep: false, level: 0 };
      writeVram();
      schedule();
    },
    preferredTokens,
    /** `collective_rpc reload_weights`: false while the weight buffers are still asleep (vLLM's worker raises). */
    reloadWeights(): boolean {
      if (sleepingTags.has('weights')) return false;
      weightsValid = true;
      return true;
    },
    /**
     * The tokens generated for one request: empty when the weights are garbage or the wake came back broken.
     * `after` is the text being continued: a reply it already ends with goes on from there.
     */
    generate(maxTokens: number, after = ''): { tokens: string[]; finish: 'stop' | 'length' } {
      if (emptyAnswers || !weightsValid) return { tokens: [], finish: 'stop' };
      const reply = preferredTokens();
      const all = reply.slice(tokensAlreadyWritten(reply, after));
      return maxTokens < all.length
        ? { tokens: all.slice(0, maxTokens), finish: 'length' }
        : { tokens: all, finish: 'stop' };
    },
    /**
     * Queues a request: it waits while the engine sleeps or every sequence slot is taken (counted in
     * `vllm:num_requests_waiting`), then runs (`vllm:num_requests_running`) until released.
     */
    admit(): Admission {
      let phase: 'waiting' | 'running' | 'done' = 'waiting';
      let aborted = false;
      let start!: () => void;
      const scheduled = new Promise<void>((resolve) => {
        start = () => {
          phase = 'running';
          running += 1;
          runningAborts.add(abort);
          resolve();
        };
      });
      const abort = () => (aborted = true);
      waiting.push(start);
      schedule();
      return {
        scheduled,
        isAborted: () => aborted,
        release() {
          if (phase === 'waiting') waiting.splice(waiting.indexOf(start), 1);
          if (phase === 'running') {
            running -= 1;
            runningAborts.delete(abort);
            if (running === 0) drained?.();
            schedule();
          }
          phase = 'done';
        },
      };
    },
    recordPrompt(tokens: number) {
      promptTokens += tokens;
    },
    /** One engine step generated a token for a request (vLLM counts generated tokens per step). */
    recordToken() {
      generated += 1;
      setKvCacheUsage(running);
    },
    /** A request finished (its tokens were counted as generated); its KV blocks are freed with it. */
    recordSuccess() {
      succeeded += 1;
      setKvCacheUsage(running - 1);
    },
    metrics: () =>
      metricsText(opts.model, {
        running,
        waiting: waiting.length,
        sleepGauge: gauge,
        generated,
        prompt: promptTokens,
        succeeded,
        kvCacheUsage,
      }),
    snapshot: () => ({
      sleeping: schedulerPaused || sleepingTags.size > 0,
      sleepingTags: [...sleepingTags],
      schedulerPaused,
      sleepLevel,
      weightsValid,
      emptyAnswers,
      garbageWeights,
      running,
      waiting: waiting.length,
    }),
  };
}
export type Engine = ReturnType<typeof createEngine>;
