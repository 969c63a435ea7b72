import { z } from 'zod';

/**
 * The probe's request and its verdict on a model's answer, shared by the supervisor (its `POST /v1/probe`, on
 * the host) and the worker (the same probe through a model's servingUrl): the supervisor may import only
 * schemas/ and lib/, so the one judge of an answer lives here.
 */

/** The part of a chat completion the probe judges (lenient: vLLM adds fields freely). */
const chatCompletionSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          reasoning_content: z.string().nullable().optional(),
          reasoning: z.string().nullable().optional(),
        }),
      }),
    )
    .min(1),
});
const vllmErrorSchema = z.object({ error: z.object({ message: z.string() }) });

/** A non-2xx vLLM answer as one line: the status and vLLM's own message (first 200 characters). */
export function describeVllmStatus(status: number, body: unknown): string {
  if (status === 401) {
    return "HTTP 401: vLLM refused the request: it runs with --api-key, and this model's apiKey in the supervisor config is missing or wrong";
  }
  const detail = vllmErrorSchema.safeParse(body);
  return `HTTP ${status}${detail.success ? `: ${detail.data.error.message.slice(0, 200)}` : ''}`;
}

/** The probe's request body for `model`: one greedy, non-streaming chat completion of `prompt`. */
export const probeRequestBody = (model: string, prompt: string, maxTokens: number) => ({
  model,
  messages: [{ role: 'user', content: prompt }],
  max_tokens: maxTokens,
  temperature: 0,
  stream: false,
});

/**
 * Why a probe's answer fails (null: it passes): a non-2xx, a body that is not a chat completion, or blank
 * generated text (the answer, or a reasoning model's reasoning when the token budget ended inside it).
 */
export function judgeProbeAnswer(status: number, body: unknown): string | null {
  if (status < 200 || status >= 300) return describeVllmStatus(status, body);
  const parsed = chatCompletionSchema.safeParse(body);
  if (!parsed.success) return 'answer is not a chat completion';
  const message = parsed.data.choices[0]!.message;
  const text = message.content || message.reasoning_content || message.reasoning || '';
  return text.trim() ? null : 'empty content';
}
