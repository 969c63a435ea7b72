import { StringDecoder } from 'node:string_decoder';

/** Why an interrupted request cannot continue on another domain (a metrics label and the error message). */
export type ResendRefusal =
  | 'off' // `X-Haru-Resend: off` or HARU_RESEND_MAX_PER_REQUEST=0
  | 'limit' // HARU_RESEND_MAX_PER_REQUEST resends already made
  | 'memory' // the relayed text outgrew HARU_RESEND_MAX_BYTES
  | 'tool_calls' // tool-call deltas were relayed: a half tool call cannot be continued as text
  | 'reasoning' // reasoning deltas were relayed: they are not part of the assistant message
  | 'n' // several choices
  | 'logprobs' // the relayed tokens' logprobs cannot be reproduced
  | 'echo' // /v1/completions echo: the continuation would echo the longer prompt
  | 'prompt' // /v1/completions with a non-string prompt (token ids, a batch)
  | 'body'; // the request body is not the JSON object it was

/**
 * Splits an SSE byte stream into whole events. vLLM frames every event as `data: …\n\n`; a chunk may end in
 * the middle of one (or of a UTF-8 sequence), which stays pending until the rest arrives.
 */
export class SseFramer {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  /** The complete events in `chunk` (without their blank-line terminator), in order. */
  push(chunk: Buffer): string[] {
    this.pending += this.decoder.write(chunk);
    const parts = this.pending.split(/\r?\n\r?\n/);
    this.pending = parts.pop()!;
    return parts;
  }
}

/** What has been relayed to the client of one streamed completion, across all its parts. */
export interface Transcript {
  /** The first part's `id`, `created` and `model`: every later chunk is rewritten to carry them. */
  id: string | null;
  created: number | null;
  model: string | null;
  /** Content (chat `delta.content`, completions `text`) relayed for choice 0; '' once `refusal` is set. */
  text: string;
  /** UTF-8 bytes of `text`, counted as it grows (measuring the whole text per event would be quadratic). */
  textBytes: number;
  /** Content-bearing chunks relayed: vLLM sends one per generated token (its default `stream_interval` of 1). */
  tokens: number;
  /** The first part's prompt tokens, when continuous usage stats told it. */
  promptTokens: number | null;
  /** A finish_reason was relayed for choice 0: nothing is left to generate. */
  finished: boolean;
  /** `data: [DONE]` was relayed. */
  done: boolean;
  /** Set once a continuation became impossible for this stream. */
  refusal: ResendRefusal | null;
  /** Which part is being relayed: 0 for the original request, n for the n-th continuation. */
  part: number;
  /** Tokens relayed before the current part started (added to the later parts' usage). */
  tokensBefore: number;
  /** The error a new upstream answered a continuation with (vLLM's `error` object), else null. */
  rejection: unknown;
  /** Bound on `text` in bytes; past it `refusal` becomes 'memory' and the text is dropped. */
  readonly maxBytes: number;
}

export const newTranscript = (maxBytes: number): Transcript => ({
  id: null,
  created: null,
  model: null,
  text: '',
  textBytes: 0,
  tokens: 0,
  promptTokens: null,
  finished: false,
  done: false,
  refusal: null,
  part: 0,
  tokensBefore: 0,
  rejection: null,
  maxBytes,
});

/** Starts relaying a continuation: its chunks are rewritten onto the first part. */
export function beginContinuation(t: Transcript): void {
  t.part += 1;
  t.tokensBefore = t.tokens;
}

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  [key: string]: unknown;
}
interface Choice {
  index?: number;
  text?: string | null;
  delta?: { role?: string; content?: string | null; tool_calls?: unknown; reasoning_content?: unknown };
  logprobs?: unknown;
  finish_reason?: string | null;
}
interface Chunk {
  id?: string;
  created?: number;
  model?: string;
  choices?: Choice[];
  usage?: Usage | null;
  [key: string]: unknown;
}

function refuse(t: Transcript, why: ResendRefusal): void {
  if (t.refusal) return;
  t.refusal = why;
  t.text = '';
  t.textBytes = 0;
}

/** Records one relayed choice; returns false when the chunk must be dropped (a continuation's repeated role chunk). */
function recordChoice(t: Transcript, choice: Choice, continuation: boolean): boolean {
  if ((choice.index ?? 0) !== 0) refuse(t, 'n');
  if (choice.logprobs != null) refuse(t, 'logprobs');
  const delta = choice.delta;
  if (delta?.tool_calls != null) refuse(t, 'tool_calls');
  if (delta?.reasoning_content != null) refuse(t, 'reasoning');
  const content = delta ? delta.content : choice.text;
  if (continuation && delta?.role !== undefined) {
    delete delta.role; // the client already has the role chunk
    if (!content && choice.finish_reason == null && delta.tool_calls == null) return false;
  }
  if (content) {
    t.tokens += 1;
    if (!t.refusal) {
      t.text += content;
      t.textBytes += Buffer.byteLength(content);
      if (t.textBytes > t.maxBytes) refuse(t, 'memory');
    }
  }
  if (choice.finish_reason != null && (choice.index ?? 0) === 0) t.finished = true;
  return true;
}

/**
 * Usage as the client must see it: a continuation's prompt includes the text already relayed, and its
 * completion counts only the new tokens, so the relayed tokens move from the prompt back to the completion.
 */
function spliceUsage(t: Transcript, usage: Usage): Usage {
  const completion = (usage.completion_tokens ?? 0) + t.tokensBefore;
  const prompt = t.promptTokens ?? Math.max(0, (usage.prompt_tokens ?? 0) - t.tokensBefore);
  return { ...usage, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/**
 * One SSE event of the upstream, recorded into `t`, and the event to relay in its place (null: drop it).
 * The first part passes through byte for byte. A continuation's events carry the first part's id, created
 * and model, lose the role chunk, and report usage for both parts together. Anything that is not a JSON
 * `data:` event (comments, `[DONE]`, an error event) passes as it is.
 */
export function spliceEvent(t: Transcript, event: string): string | null {
  if (!event.startsWith('data:')) return event;
  const data = event.slice(5).trimStart();
  if (data === '[DONE]') {
    t.done = true;
    return event;
  }
  let chunk: Chunk;
  try {
    chunk = JSON.parse(data) as Chunk;
  } catch {
    return event;
  }
  if (typeof chunk !== 'object' || chunk === null || !Array.isArray(chunk.choices)) return event;
  const continuation = t.part > 0;
  if (!continuation) {
    t.id ??= chunk.id ?? null;
    t.created ??= chunk.created ?? null;
    t.model ??= chunk.model ?? null;
    if (chunk.usage && typeof chunk.usage.prompt_tokens === 'number') t.promptTokens = chunk.usage.prompt_tokens;
  }
  const kept = chunk.choices.filter((c) => recordChoice(t, c, continuation));
  if (!continuation) return event;
  if (kept.length === 0 && chunk.choices.length > 0) return null;
  const out: Chunk = { ...chunk, choices: kept };
  if (t.id !== null) out.id = t.id;
  if (t.created !== null) out.created = t.created;
  if (t.model !== null) out.model = t.model;
  if (chunk.usage) out.usage = spliceUsage(t, chunk.usage);
  return `data: ${JSON.stringify(out)}`;
}
