/**
 * Response bodies in vLLM's OpenAI-compatible shapes (vllm/entrypoints/openai/protocol.py): field names,
 * null fields and id prefixes as vLLM serialises them, so clients and the Haru proxy meet the real format.
 */
import { randomBytes } from 'node:crypto';

export const randomId = (prefix: string) => `${prefix}-${randomBytes(16).toString('hex')}`;

/** vLLM's error body: `{"error": {"message", "type", "param", "code"}}` with `code` the HTTP status. */
export function errorBody(message: string, type: string, code: number, param: string | null = null) {
  return { error: { message, type, param, code } };
}

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: null;
}
export const usage = (prompt: number, completion: number): Usage => ({
  prompt_tokens: prompt,
  total_tokens: prompt + completion,
  completion_tokens: completion,
  prompt_tokens_details: null,
});

export function chatCompletion(id: string, created: number, model: string, content: string, finish: string, u: Usage) {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          refusal: null,
          annotations: null,
          audio: null,
          function_call: null,
          tool_calls: [],
          reasoning_content: null,
        },
        logprobs: null,
        finish_reason: finish,
        stop_reason: null,
      },
    ],
    service_tier: null,
    system_fingerprint: null,
    usage: u,
    prompt_logprobs: null,
    kv_transfer_params: null,
  };
}

export function chatChunk(
  id: string,
  created: number,
  model: string,
  delta: Record<string, string>,
  finish: string | null,
  u?: Usage,
) {
  const choice: Record<string, unknown> = { index: 0, delta, logprobs: null, finish_reason: finish };
  if (finish) choice.stop_reason = null;
  return { id, object: 'chat.completion.chunk', created, model, choices: [choice], ...(u ? { usage: u } : {}) };
}

/** The final chunk of a stream with `stream_options.include_usage`: no choices, only usage. */
export const usageChunk = (id: string, object: string, created: number, model: string, u: Usage) => ({
  id,
  object,
  created,
  model,
  choices: [],
  usage: u,
});

export function textCompletion(
  id: string,
  created: number,
  model: string,
  text: string,
  finish: string,
  u: Usage,
  logprobs: unknown = null,
) {
  return {
    id,
    object: 'text_completion',
    created,
    model,
    choices: [{ index: 0, text, logprobs, finish_reason: finish, stop_reason: null, prompt_logprobs: null }],
    service_tier: null,
    system_fingerprint: null,
    usage: u,
    kv_transfer_params: null,
  };
}

export function textChunk(id: string, created: number, model: string, text: string, finish: string | null, u?: Usage) {
  return {
    id,
    object: 'text_completion',
    created,
    model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finish, stop_reason: null }],
    ...(u ? { usage: u } : {}),
  };
}

/**
 * `/v1/models`: the base model, then each LoRA adapter with `root` its path and `parent` the base
 * (vllm/entrypoints/openai/models/serving.py `show_available_models`).
 */
export function modelList(
  model: string,
  created: number,
  maxModelLen: number,
  adapters: readonly { name: string; path: string }[] = [],
) {
  const card = (id: string, root: string, parent: string | null) => ({
    id,
    object: 'model',
    created,
    owned_by: 'vllm',
    root,
    parent,
    max_model_len: maxModelLen,
    permission: [
      {
        id: randomId('modelperm'),
        object: 'model_permission',
        created,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: '*',
        group: null,
        is_blocking: false,
      },
    ],
  });
  return { object: 'list', data: [card(model, model, null), ...adapters.map((a) => card(a.name, a.path, model))] };
}

/** A deterministic unit vector for `text` (8 dimensions): equal inputs embed equally. */
export function embed(text: string): number[] {
  const v = Array.from({ length: 8 }, (_, i) => {
    let h = 2166136261 ^ i;
    for (let j = 0; j < text.length; j += 1) h = Math.imul(h ^ text.charCodeAt(j), 16777619);
    return ((h >>> 0) / 0xffffffff) * 2 - 1;
  });
  const norm = Math.hypot(...v) || 1;
  return v.map((x) => x / norm);
}

/** Prometheus text for the gauges Haru reads, labelled as vLLM labels them (`engine`, `model_name`). */
export function metricsText(
  model: string,
  s: {
    running: number;
    waiting: number;
    /** As vLLM's `record_sleep_state(sleep, level)` last set it (vllm/v1/metrics/loggers.py). */
    sleepGauge: { asleep: boolean; level: 0 | 1 | 2 };
    generated: number;
    prompt: number;
    succeeded: number;
    /** `vllm:kv_cache_usage_perc` (0-1). */
    kvCacheUsage: number;
  },
) {
  const labels = `engine="0",model_name="${model.replace(/["\\]/g, '\\$&')}"`;
  const f = (n: number) => (Number.isInteger(n) ? `${n}.0` : String(n));
  return [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    '# TYPE vllm:num_requests_running gauge',
    `vllm:num_requests_running{${labels}} ${f(s.running)}`,
    '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
    '# TYPE vllm:num_requests_waiting gauge',
    `vllm:num_requests_waiting{${labels}} ${f(s.waiting)}`,
    '# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.',
    '# TYPE vllm:engine_sleep_state gauge',
    `vllm:engine_sleep_state{${labels},sleep_state="awake"} ${f(s.sleepGauge.asleep ? 0 : 1)}`,
    `vllm:engine_sleep_state{${labels},sleep_state="weights_offloaded"} ${f(s.sleepGauge.asleep && s.sleepGauge.level === 1 ? 1 : 0)}`,
    `vllm:engine_sleep_state{${labels},sleep_state="discard_all"} ${f(s.sleepGauge.asleep && s.sleepGauge.level === 2 ? 1 : 0)}`,
    '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
    '# TYPE vllm:kv_cache_usage_perc gauge',
    `vllm:kv_cache_usage_perc{${labels}} ${f(s.kvCacheUsage)}`,
    '# HELP vllm:prompt_tokens_total Number of prefill tokens processed.',
    '# TYPE vllm:prompt_tokens_total counter',
    `vllm:prompt_tokens_total{${labels}} ${f(s.prompt)}`,
    '# HELP vllm:generation_tokens_total Number of generation tokens processed.',
    '# TYPE vllm:generation_tokens_total counter',
    `vllm:generation_tokens_total{${labels}} ${f(s.generated)}`,
    '# HELP vllm:request_success_total Count of successfully processed requests.',
    '# TYPE vllm:request_success_total counter',
    `vllm:request_success_total{${labels},finished_reason="stop"} ${f(s.succeeded)}`,
    '',
  ].join('\n');
}
