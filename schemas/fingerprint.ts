import { z } from 'zod';
import { modelNameSchema } from './layout';

// ---------------------------------------------------------------------------------------------------------------
// Wake fidelity: what a model answered before it slept, and how it scored that answer, so a woken model can be
// asked to score the same answer again (docs/architecture.md §4.3, §9.2).
// ---------------------------------------------------------------------------------------------------------------

/**
 * The fixed prompt every fingerprint is taken with: plain text for `/v1/completions` (no chat template, so the
 * scoring call sees exactly the tokens the answer was generated after).
 */
export const FINGERPRINT_PROMPT = 'The quick brown fox jumps over the lazy dog. Then the fox';

/** One model's fingerprint: its greedy answer to the prompt and the logprob of each answer token. */
export const modelFingerprintSchema = z.object({
  prompt: z.string(),
  /** The greedy answer (temperature 0). */
  text: z.string(),
  /** The answer's tokens as vLLM printed them, one per logprob. */
  tokens: z.array(z.string()),
  /** Natural-log probability of each answer token under the model, as vLLM returned it. */
  tokenLogprobs: z.array(z.number()),
  takenAt: z.string(),
  /** The pid of the process serving the model's port when it was taken: a restarted server has other weights, maybe. */
  serverPid: z.number().int().nullable().optional(),
});
export type ModelFingerprint = z.infer<typeof modelFingerprintSchema>;

/** A slot's fingerprints by model name, stored on the slot row (`slots.wake_fingerprints`). */
export const wakeFingerprintsSchema = z.record(z.string(), modelFingerprintSchema);
export type WakeFingerprints = z.infer<typeof wakeFingerprintsSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Supervisor API: take a fingerprint (greedy answer with logprobs), score a stored answer (echo, no generation).
// ---------------------------------------------------------------------------------------------------------------

export const fingerprintRequestSchema = z.strictObject({
  prompt: z.string().min(1).max(2_000),
  maxTokens: z.number().int().min(1).max(64),
  timeoutMs: z.number().int().min(1).max(600_000),
  /** Only these models; all configured models when absent. */
  models: z.array(modelNameSchema).optional(),
});
export type FingerprintRequest = z.infer<typeof fingerprintRequestSchema>;

export const scoreRequestSchema = z.strictObject({
  prompt: z.string().min(1).max(2_000),
  timeoutMs: z.number().int().min(1).max(600_000),
  /** The stored answers to score, one per model: the text and how many tokens it had. */
  answers: z
    .array(
      z.strictObject({
        model: modelNameSchema,
        text: z.string().max(4_000),
        tokenCount: z.number().int().min(1).max(64),
      }),
    )
    .min(1),
});
export type ScoreRequest = z.infer<typeof scoreRequestSchema>;

const measuredBase = {
  model: z.string(),
  ok: z.boolean(),
  /** Why the model could not be measured; null when ok. */
  error: z.string().nullable(),
};

export const fingerprintResultSchema = z.object({
  ...measuredBase,
  text: z.string().nullable(),
  tokens: z.array(z.string()),
  tokenLogprobs: z.array(z.number()),
  /** The process listening on the model's port (vLLM's API server); null when not found. */
  serverPid: z.number().int().nullable().default(null),
});
export type FingerprintResult = z.infer<typeof fingerprintResultSchema>;
export const fingerprintResponseSchema = z.object({ results: z.array(fingerprintResultSchema) });
export type FingerprintResponse = z.infer<typeof fingerprintResponseSchema>;

export const scoreResultSchema = z.object({
  ...measuredBase,
  /** Logprob of each of the last `tokenCount` prompt tokens, i.e. of the stored answer. */
  tokenLogprobs: z.array(z.number()),
});
export type ScoreResult = z.infer<typeof scoreResultSchema>;
export const scoreResponseSchema = z.object({ results: z.array(scoreResultSchema) });
export type ScoreResponse = z.infer<typeof scoreResponseSchema>;
