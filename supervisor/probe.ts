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

export interface ProbeInput {
  models: { name: string; port: number }[];
  prompt: string;
  maxTokens: number;
  timeoutMs: number;
}

/**
 * Sends one synthetic, non-streaming chat completion to every model, in parallel. A model passes only with a
 * 2xx and non-blank generated text (the answer, or a reasoning model's reasoning when the token budget ended
 * inside it). A timeout, an error status or empty content fails that model with the reason; the prompt and
 * the answer are never echoed in errors.
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
          {
            model: model.name,
            messages: [{ role: 'user', content: input.prompt }],
            max_tokens: input.maxTokens,
            temperature: 0,
            stream: false,
          },
          input.timeoutMs,
        );
        if (res.status < 200 || res.status >= 300) return result(false, describeVllmStatus(res.status, res.body));
        const parsed = chatCompletionSchema.safeParse(res.body);
        if (!parsed.success) return result(false, 'answer is not a chat completion');
        const message = parsed.data.choices[0]!.message;
        const text = message.content || message.reasoning_content || message.reasoning || '';
        if (!text.trim()) return result(false, 'empty content');
        return result(true, null);
      } catch (err) {
        return result(false, (err as Error).message);
      }
    }),
  );
}
