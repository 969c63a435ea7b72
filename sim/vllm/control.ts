import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { writeJsonAtomic } from '../gpu-state';

/**
 * Fault injection and tuning for one fake vLLM. Written by tests or `startSimDomain().faults` to the model's
 * control file (`<stateDir>/vllm/<model>.control.json`); the fake re-reads it on every request and polls it
 * every 50 ms, so a written fault applies to the very next request.
 */
export const vllmControlSchema = z.strictObject({
  /**
   * Inference endpoints (`/v1/*`) accept the request and never answer: a wedged engine core. The requests count
   * as running, the generation counter and KV-cache gauge stand still, `/health` and `/metrics` still answer.
   */
  hang: z.boolean().default(false),
  /** Inference endpoints answer every request with a 500 in vLLM's error shape (an engine that errors). */
  error: z.boolean().default(false),
  /** The listener is closed: connections are refused while the process lives on. */
  refuse: z.boolean().default(false),
  /** The process dies at once (SIGKILL on itself), as a crashed engine would. */
  crash: z.boolean().default(false),
  /**
   * The process dies (as `crash`) once one request has generated this many tokens, right after a stream
   * relayed the last of them: a host dying mid-stream or mid-request at a known point.
   */
  crashAfterTokens: z.number().int().positive().optional(),
  /**
   * A non-streaming answer is cut after this many bytes of its body: the headers (with the whole body's
   * `content-length`) and these bytes go out, then the process dies (as `crash`). Real vLLM sends such an
   * answer in one piece once generation ends (a `JSONResponse`, vllm/entrypoints/openai/api_server.py), so
   * this is a host dying while a large answer was on the wire.
   */
  crashAfterBodyBytes: z.number().int().positive().optional(),
  /** After the next wake, completions carry empty content (a wake that came back broken). */
  emptyContentAfterWake: z.boolean().default(false),
  /**
   * After the next wake, the engine answers from other weights: non-empty but different text, and a stored
   * answer scores far lower (the garbage-after-wake bugs of vLLM: prefix cache reused across sleep, a level-2
   * wake without `reload_weights`, LoRA state lost).
   */
  garbageAfterWake: z.boolean().default(false),
  /** `/wake_up` answers 200 but the engine stays asleep. */
  wakeNoop: z.boolean().default(false),
  /** `/sleep` answers 200 but the engine stays awake. */
  sleepNoop: z.boolean().default(false),
  /**
   * The next N `POST /reset_prefix_cache` answer `{"success": false}`, as the engine's `reset_prefix_cache`
   * reports while requests are running (vllm/engine/protocol.py returns a bool); then `{"success": true}`.
   */
  prefixResetFailures: z.number().int().min(0).default(0),
  /** Overrides the start-up wake delay. */
  wakeDelayMs: z.number().int().min(0).optional(),
  /** Override the start-up sleep delays (every sleep; the first sleep of the process on top). */
  sleepDelayMs: z.number().int().min(0).optional(),
  firstSleepDelayMs: z.number().int().min(0).optional(),
  /** Overrides what `GET /version` answers (an older vLLM, say). */
  vllmVersion: z.string().min(1).optional(),
  /**
   * The engine runs in the API server's process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): `/sleep?mode=wait` is a 500,
   * as vLLM's in-process engine core raises ValueError for it (vllm/v1/engine/core.py `pause_scheduler`).
   */
  inprocEngine: z.boolean().default(false),
  /** Overrides the start-up token rate. */
  tokensPerSecond: z.number().positive().optional(),
  /**
   * Event-loop lag of the API server: every endpoint but inference answers this much later (real vLLM
   * serves `/health`, `/metrics` and the sleep routes on the event loop that also streams every token,
   * so they slow down under load). With `adminLagMaxMs` the lag is drawn uniformly between the two.
   */
  adminLagMs: z.number().int().min(0).optional(),
  adminLagMaxMs: z.number().int().min(0).optional(),
  /** More lag per request running or waiting (load). */
  adminLagPerRequestMs: z.number().min(0).optional(),
});
export type VllmControl = z.infer<typeof vllmControlSchema>;
export type VllmControlInput = z.input<typeof vllmControlSchema>;

export const NO_FAULTS: VllmControl = vllmControlSchema.parse({});

/** Reads a control file; a missing or half-written file means no faults. */
export function readControlFile(file: string): VllmControl {
  try {
    return vllmControlSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch {
    return NO_FAULTS;
  }
}

/** Writes a whole control (unspecified faults off) atomically. */
export function writeControlFile(file: string, control: VllmControlInput): void {
  writeJsonAtomic(file, vllmControlSchema.parse(control));
}
