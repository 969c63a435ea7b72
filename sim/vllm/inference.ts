import type http from 'node:http';
import { continuedText, generationPromptError, responseRole } from './continuation';
import type { Admission, Engine } from './engine';
import { delay, readBody, send } from './http-util';
import { joinLogprobs, logprobsOf, tokenize } from './logprobs';
import * as p from './protocol';

const DEFAULT_MAX_TOKENS = 32;
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

export type InferenceKind = 'chat' | 'completion' | 'embedding';

export interface InferenceContext {
  model: string;
  /** Served names of the LoRA adapters loaded beside the base model. */
  adapters: readonly string[];
  engine: Engine;
  /** The current `hang` fault. */
  isHanging: () => boolean;
  /** The current `error` fault. */
  isErroring: () => boolean;
  /** Delay between generated tokens, from the current token rate. */
  tokenDelayMs: () => number;
  /** The current `crashAfterTokens` fault. */
  crashAfterTokens: () => number | undefined;
  /** The current `crashAfterBodyBytes` fault. */
  crashAfterBodyBytes: () => number | undefined;
  /** Kills the fake vLLM as the `crash` fault does. */
  crash: () => void;
}

interface StreamOptions {
  include_usage?: boolean;
  continuous_usage_stats?: boolean;
}

/** Parses a JSON object body as vLLM's `validate_json_request` does; sends the 400 and returns null otherwise. */
async function parseJson(req: http.IncomingMessage, res: http.ServerResponse): Promise<Record<string, unknown> | null> {
  const type = req.headers['content-type'] ?? '';
  if (!type.toLowerCase().includes('application/json')) {
    send(res, 400, p.errorBody("Unsupported Media Type: Only 'application/json' is allowed", 'BadRequestError', 400));
    return null;
  }
  const text = await readBody(req);
  try {
    const body: unknown = JSON.parse(text);
    if (body && typeof body === 'object' && !Array.isArray(body)) return body as Record<string, unknown>;
  } catch {
    // falls through to the 400 below
  }
  send(res, 400, p.errorBody('JSON decode error', 'BadRequestError', 400));
  return null;
}

/** vLLM's checks before any inference, in its order; sends the error and returns false. */
function validate(kind: InferenceKind, body: Record<string, unknown>, res: http.ServerResponse, ctx: InferenceContext) {
  const model = body.model ?? ctx.model;
  const required = { chat: 'messages', completion: 'prompt', embedding: 'input' }[kind];
  const value = body[required];
  let error: [number, string, string, string | null] | null = null;
  if (model !== ctx.model && !ctx.adapters.includes(String(model)))
    error = [404, `The model \`${String(model)}\` does not exist.`, 'NotFoundError', 'model'];
  else if (body.stream_options != null && body.stream !== true) {
    error = [400, 'Stream options can only be defined when `stream=True`.', 'BadRequestError', null];
  } else if (kind === 'chat' ? !Array.isArray(value) : typeof value !== 'string' && !Array.isArray(value)) {
    error = [400, `${required}: Field required`, 'BadRequestError', required];
  } else if (kind === 'chat' && generationPromptError(body)) {
    error = [400, generationPromptError(body)!, 'BadRequestError', null];
  }
  if (error) send(res, error[0], p.errorBody(error[1], error[2], error[0], error[3]));
  return error === null;
}

function promptTokens(kind: InferenceKind, body: Record<string, unknown>): number {
  if (kind === 'chat') {
    return (body.messages as { content?: unknown }[]).reduce(
      (n, m) => n + (typeof m.content === 'string' ? words(m.content) : 1),
      0,
    );
  }
  return [kind === 'completion' ? body.prompt : body.input]
    .flat()
    .reduce((n: number, s) => n + (typeof s === 'string' ? words(s) : 1), 0);
}

/** Handles `/v1/chat/completions`, `/v1/completions` and `/v1/embeddings`. */
export async function handleInference(
  kind: InferenceKind,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: InferenceContext,
): Promise<void> {
  const body = await parseJson(req, res);
  if (!body || !validate(kind, body, res, ctx)) return;
  // Answers name the model asked for: the base or one of its adapters (vLLM's `models.model_name(lora_request)`).
  if (typeof body.model === 'string') ctx = { ...ctx, model: body.model };
  if (ctx.isErroring()) {
    // vLLM's answer once its engine core failed (EngineDeadError / EngineGenerateError: a 500).
    const message = 'EngineCore encountered an issue. See stack trace (above) for the root cause.';
    return send(res, 500, p.errorBody(message, 'InternalServerError', 500));
  }
  // A sleeping engine does not refuse: the request waits in the scheduler's queue until a wake (vLLM's
  // engine core keeps adding requests while its scheduler is paused: vllm/v1/engine/core.py).
  const admission = ctx.engine.admit();
  const release = () => admission.release();
  res.on('close', release);
  await admission.scheduled;
  if (res.destroyed) return release();
  if (ctx.isHanging()) return; // never answers; the running slot frees when the client goes away
  try {
    const prompt = promptTokens(kind, body);
    ctx.engine.recordPrompt(prompt);
    if (kind === 'embedding') return embedding(body, prompt, res, ctx);
    const isScored = body.echo === true || typeof body.logprobs === 'number' || body.max_tokens === 0;
    if (kind === 'completion' && body.stream !== true && isScored) {
      return await scoredCompletion(body, prompt, res, ctx);
    }
    const n = body.max_completion_tokens ?? body.max_tokens;
    const planned = ctx.engine.generate(
      typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : DEFAULT_MAX_TOKENS,
      continuedText(kind, body),
    );
    const role = kind === 'chat' ? responseRole(body) : 'assistant';
    const out = { prompt, tokens: planned.tokens, finish: planned.finish as string, role };
    if (body.stream === true) {
      await streamed(kind, req, res, ctx, out, admission, (body.stream_options ?? {}) as StreamOptions);
    } else {
      const generated = await generateUntilAborted(out.tokens, ctx, admission);
      if (generated === 'crashed') return ctx.crash();
      out.tokens = generated;
      if (admission.isAborted()) out.finish = 'abort';
      const u = p.usage(prompt, out.tokens.length);
      const id = p.randomId(kind === 'chat' ? 'chatcmpl' : 'cmpl');
      const now = Math.floor(Date.now() / 1000);
      const text = out.tokens.join('');
      const answer =
        kind === 'chat'
          ? p.chatCompletion(id, now, ctx.model, text, out.finish, u)
          : p.textCompletion(id, now, ctx.model, text, out.finish, u);
      const cutAt = ctx.crashAfterBodyBytes();
      if (cutAt !== undefined) return sendCut(res, answer, cutAt, ctx.crash);
      send(res, 200, answer);
    }
    if (!admission.isAborted()) ctx.engine.recordSuccess();
  } finally {
    release();
  }
}

/**
 * The tokens generated at the token rate until done or aborted by a sleep (the ones so far), or `crashed` when
 * the `crashAfterTokens` fault is due.
 */
async function generateUntilAborted(
  tokens: string[],
  ctx: InferenceContext,
  admission: Admission,
): Promise<string[] | 'crashed'> {
  for (let i = 0; i < tokens.length; i += 1) {
    await delay(ctx.tokenDelayMs());
    if (admission.isAborted()) return tokens.slice(0, i);
    ctx.engine.recordToken();
    if (diesAfter(ctx, i + 1)) return 'crashed';
  }
  return tokens;
}

/** SSE as vLLM frames it: `data: {json}\n\n` per chunk, `data: [DONE]\n\n` at the end. */
async function streamed(
  kind: 'chat' | 'completion',
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: InferenceContext,
  out: { prompt: number; tokens: string[]; finish: string; role: string },
  admission: Admission,
  so: StreamOptions,
): Promise<void> {
  const id = p.randomId(kind === 'chat' ? 'chatcmpl' : 'cmpl');
  const now = Math.floor(Date.now() / 1000);
  const m = ctx.model;
  const live = (n: number) => (so.include_usage && so.continuous_usage_stats ? p.usage(out.prompt, n) : undefined);
  const chunk = (text: string, finish: string | null, n: number) =>
    kind === 'chat'
      ? p.chatChunk(id, now, m, { content: text }, finish, live(n))
      : p.textChunk(id, now, m, text, finish, live(n));

  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  let closed = false;
  req.on('close', () => (closed = true));
  res.on('close', () => (closed = true));
  const emit = (data: unknown) => {
    if (!closed) res.write(`data: ${JSON.stringify(data)}\n\n`);
  };
  // vLLM's first chat chunk carries the role with empty content.
  if (kind === 'chat') emit(p.chatChunk(id, now, m, { role: out.role, content: '' }, null, live(0)));
  if (out.tokens.length === 0) emit(chunk('', out.finish, 0));
  for (let i = 0; i < out.tokens.length; i += 1) {
    await delay(ctx.tokenDelayMs());
    if (closed) return void res.destroy(); // the client went away: vLLM aborts the request
    if (admission.isAborted()) {
      // A sleep in abort mode finished the request: vLLM sends a last chunk with finish_reason "abort".
      out.tokens = out.tokens.slice(0, i);
      emit(chunk('', 'abort', i));
      break;
    }
    ctx.engine.recordToken();
    emit(chunk(out.tokens[i]!, i === out.tokens.length - 1 ? out.finish : null, i + 1));
    if (diesAfter(ctx, i + 1)) return void res.write('', () => ctx.crash()); // once the token left
  }
  if (so.include_usage) {
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    emit(p.usageChunk(id, object, now, m, p.usage(out.prompt, out.tokens.length)));
  }
  if (!closed) res.end('data: [DONE]\n\n');
}

/** The `crashAfterBodyBytes` fault: headers for the whole answer, its first `bytes` bytes, then a crash. */
function sendCut(res: http.ServerResponse, body: unknown, bytes: number, crash: () => void): void {
  const text = Buffer.from(JSON.stringify(body));
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': text.length });
  res.write(text.subarray(0, Math.min(bytes, text.length - 1)), () => crash());
}

/** The `crashAfterTokens` fault is due after `generated` tokens of one request. */
const diesAfter = (ctx: InferenceContext, generated: number) => {
  const limit = ctx.crashAfterTokens();
  return limit !== undefined && generated >= limit;
};

function embedding(body: Record<string, unknown>, prompt: number, res: http.ServerResponse, ctx: InferenceContext) {
  const inputs = [body.input].flat().map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
  const asBase64 = body.encoding_format === 'base64';
  send(res, 200, {
    id: p.randomId('embd'),
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: ctx.model,
    data: inputs.map(p.embed).map((v, index) => ({
      index,
      object: 'embedding',
      embedding: asBase64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v,
    })),
    usage: { prompt_tokens: prompt, total_tokens: prompt, completion_tokens: 0, prompt_tokens_details: null },
  });
  ctx.engine.recordSuccess();
}

/**
 * A non-streaming `/v1/completions` with `logprobs` or `echo` (vllm/entrypoints/openai/completion/serving.py):
 * `echo` prepends the prompt and its prompt logprobs; `echo` with `max_tokens: 0` generates nothing and returns
 * the prompt alone (protocol.py `echo_without_generation`); `max_tokens: 0` without `echo` is SamplingParams'
 * 400. A string prompt only (the first of a list).
 */
async function scoredCompletion(
  body: Record<string, unknown>,
  promptCount: number,
  res: http.ServerResponse,
  ctx: InferenceContext,
) {
  const echo = body.echo === true;
  const n = body.max_tokens;
  if (n === 0 && !echo) {
    return send(res, 400, p.errorBody('max_tokens must be at least 1, got 0.', 'BadRequestError', 400, 'max_tokens'));
  }
  const promptText = String([body.prompt].flat()[0] ?? '');
  const promptTokens = tokenize(promptText);
  const maxTokens = typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : n === 0 ? 0 : DEFAULT_MAX_TOKENS;
  const out = maxTokens === 0 ? { tokens: [], finish: 'length' } : ctx.engine.generate(maxTokens);
  // A continuation of text starts with a space, as a tokenizer's first generated word does.
  const joins = promptText !== '' && !/\s$/.test(promptText);
  const tokens = out.tokens.map((t, i) => (i === 0 && joins && !/^\s/.test(t) ? ` ${t}` : t));
  const { finish } = out;
  for (let i = 0; i < tokens.length; i += 1) {
    await delay(ctx.tokenDelayMs());
    ctx.engine.recordToken();
  }
  const preferred = ctx.engine.preferredTokens();
  const generated = logprobsOf(preferred, tokens, promptTokens.at(-1) ?? null, false, echo ? promptText.length : 0);
  const logprobs = echo ? joinLogprobs(logprobsOf(preferred, promptTokens, null, true), generated) : generated;
  const text = (echo ? promptText : '') + tokens.join('');
  const completion = p.textCompletion(
    p.randomId('cmpl'),
    Math.floor(Date.now() / 1000),
    ctx.model,
    text,
    finish,
    p.usage(promptCount, tokens.length),
    typeof body.logprobs === 'number' ? logprobs : null,
  );
  send(res, 200, completion);
  ctx.engine.recordSuccess();
}
