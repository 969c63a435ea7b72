import { setHolding } from '../gpu-state';
import { tokensAlreadyWritten } from './continuation';
import { metricsText } from './protocol';

export type MemoryTag = 'weights' | 'kv_cache';
export const MEMORY_TAGS: readonly MemoryTag[] = ['weights', 'kv_cache'];

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
}

/**
 * The simulated engine behind one fake vLLM: sleep tags as vLLM's CuMemAllocator tracks them, whether the
 * weights are valid (a level-2 sleep discards them until `reload_weights`), counters for /metrics, and the
 * VRAM it holds, written to the GPU state on every change.
 */
export function createEngine(opts: EngineOptions) {
  const sleepingTags = new Set<MemoryTag>(opts.startAsleep ? MEMORY_TAGS : []);
  let sleepLevel: 0 | 1 | 2 = opts.startAsleep ? 1 : 0;
  let weightsValid = true;
  let emptyAnswers = false;
  let garbageWeights = false;
  let running = 0;
  let generated = 0;
  let promptTokens = 0;
  let succeeded = 0;

  /** The tokens the current weights prefer, in order: greedy decoding emits them, scoring favours them. */
  const preferredTokens = (): string[] => tokenize(garbageWeights || !weightsValid ? GARBAGE : SENTENCE);

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
    get sleeping() {
      return sleepingTags.size > 0;
    },
    /** Sleeps at `level` (no-op when already asleep, as vLLM's executor does). */
    sleep(level: 1 | 2) {
      if (sleepingTags.size > 0) return;
      for (const tag of MEMORY_TAGS) sleepingTags.add(tag);
      sleepLevel = level;
      if (level === 2) weightsValid = false; // discarded: garbage until reload_weights
      writeVram();
    },
    /** Wakes `tags` (all when empty); `faults` say how the engine comes back once fully awake. */
    wake(tags: MemoryTag[], faults: WakeFaults = {}) {
      for (const tag of tags.length ? tags : MEMORY_TAGS) sleepingTags.delete(tag);
      if (sleepingTags.size === 0) {
        sleepLevel = 0;
        if (faults.emptyAfter) emptyAnswers = true;
        // Each full wake decides afresh: the fault corrupts the wake it is set for, a later clean wake is healthy.
        garbageWeights = faults.garbageAfter === true;
      }
      writeVram();
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
    /** Counts a request as running until the returned release is called (idempotent). */
    admit(): () => void {
      running += 1;
      let counted = true;
      return () => {
        if (counted) running -= 1;
        counted = false;
      };
    },
    recordPrompt(tokens: number) {
      promptTokens += tokens;
    },
    recordSuccess(tokens: number) {
      generated += tokens;
      succeeded += 1;
    },
    metrics: () => metricsText(opts.model, { running, sleepLevel, generated, prompt: promptTokens, succeeded }),
    snapshot: () => ({
      sleeping: sleepingTags.size > 0,
      sleepingTags: [...sleepingTags],
      sleepLevel,
      weightsValid,
      emptyAnswers,
      garbageWeights,
      running,
    }),
  };
}
export type Engine = ReturnType<typeof createEngine>;
