import { z } from 'zod';
import type { ProbeModelResult } from '../schemas/supervisor';
import type { VllmClient } from './vllm';

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

export interface ProbeInput {
  models: { name: string; port: number }[];
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

/**
 * Sends one synthetic, non-streaming chat completion to every model, in parallel, judged by judgeProbeAnswer.
 * A timeout, an error status or empty content fails that model with the reason; the prompt and the answer are
 * never echoed in errors.
 */
export async function probeModels(
  input: ProbeInput,
  deps: { vllm: VllmClient; now: () => Date },
): Promise<ProbeModelResult[]> {
  return Promise.all(
    input.models.map(async (model): Promise<ProbeModelResult> => {
      const started = deps.now().getTime();
      const result = (ok: boolean, error: string | null): ProbeModelResult => ({
        model: model.name,
        ok,
        latencyMs: Math.max(0, deps.now().getTime() - started),
        error,
      });
      try {
        const res = await deps.vllm.chatCompletion(
          model.port,
          probeRequestBody(model.name, input.prompt, input.maxTokens),
          input.timeoutMs,
        );
        const error = judgeProbeAnswer(res.status, res.body);
        return result(error === null, error);
      } catch (err) {
        return result(false, (err as Error).message);
      }
    }),
  );
}
