import type http from 'node:http';
import type { Admission, Engine } from './engine';
import { delay, readBody, send } from './http-util';
import * as p from './protocol';

const DEFAULT_MAX_TOKENS = 32;
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

export type InferenceKind = 'chat' | 'completion' | 'embedding';

export interface InferenceContext {
  model: string;
  engine: Engine;
  /** The current `hang` fault. */
  isHanging: () => boolean;
  /** Delay between generated tokens, from the current token rate. */
  tokenDelayMs: () => number;
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
  if (model !== ctx.model) error = [404, `The model \`${String(model)}\` does not exist.`, 'NotFoundError', 'model'];
  else if (body.stream_options != null && body.stream !== true) {
    error = [400, 'Stream options can only be defined when `stream=True`.', 'BadRequestError', null];
  } else if (kind === 'chat' ? !Array.isArray(value) : typeof value !== 'string' && !Array.isArray(value)) {
    error = [400, `${required}: Field required`, 'BadRequestError', required];
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
    const n = body.max_completion_tokens ?? body.max_tokens;
    const planned = ctx.engine.generate(typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : DEFAULT_MAX_TOKENS);
    const out = { prompt, tokens: planned.tokens, finish: planned.finish as string };
    if (body.stream === true) {
      await streamed(kind, req, res, ctx, out, admission, (body.stream_options ?? {}) as StreamOptions);
    } else {
      out.tokens = await generateUntilAborted(out.tokens, ctx, admission);
      if (admission.isAborted()) out.finish = 'abort';
      const u = p.usage(prompt, out.tokens.length);
      const id = p.randomId(kind === 'chat' ? 'chatcmpl' : 'cmpl');
      const now = Math.floor(Date.now() / 1000);
      const text = out.tokens.join('');
      send(
        res,
        200,
        kind === 'chat'
          ? p.chatCompletion(id, now, ctx.model, text, out.finish, u)
          : p.textCompletion(id, now, ctx.model, text, out.finish, u),
      );
    }
    if (!admission.isAborted()) ctx.engine.recordSuccess(out.tokens.length);
  } finally {
    release();
  }
}

/** The tokens generated at the token rate until done or aborted by a sleep (the ones so far). */
async function generateUntilAborted(tokens: string[], ctx: InferenceContext, admission: Admission) {
  for (let i = 0; i < tokens.length; i += 1) {
    await delay(ctx.tokenDelayMs());
    if (admission.isAborted()) return tokens.slice(0, i);
  }
  return tokens;
}

/** SSE as vLLM frames it: `data: {json}\n\n` per chunk, `data: [DONE]\n\n` at the end. */
async function streamed(
  kind: 'chat' | 'completion',
  req: http.IncomingMessage,
  res: http.ServerResponse,
  ctx: InferenceContext,
  out: { prompt: number; tokens: string[]; finish: string },
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
  if (kind === 'chat') emit(p.chatChunk(id, now, m, { role: 'assistant', content: '' }, null, live(0)));
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
    emit(chunk(out.tokens[i]!, i === out.tokens.length - 1 ? out.finish : null, i + 1));
  }
  if (so.include_usage) {
    const object = kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
    emit(p.usageChunk(id, object, now, m, p.usage(out.prompt, out.tokens.length)));
  }
  if (!closed) res.end('data: [DONE]\n\n');
}

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
  ctx.engine.recordSuccess(0);
}
