import { statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setHolding } from '../gpu-state';
import { NO_FAULTS, readControlFile, type VllmControl, type VllmControlInput, vllmControlSchema } from './control';
import * as p from './protocol';

export interface FakeVllmOptions {
  /** The served model name (`--served-model-name`). */
  model: string;
  /** Port to listen on (0 = any). */
  port: number;
  /** Listen address; 127.0.0.1 (how Haru runs vLLM) unless the serving URL must be reachable from elsewhere. */
  host?: string;
  gpuIndex: number;
  /** Simulated GPU state dir; VRAM use is written there under this process's pid. */
  gpuStateDir?: string;
  /** Control file with faults (see control.ts); re-read on every request. */
  controlFile?: string;
  wakeDelayMs?: number;
  tokensPerSecond?: number;
  /** VRAM of the weights and of the KV cache while awake, and of the CUDA context that stays when asleep. */
  weightsMiB?: number;
  kvCacheMiB?: number;
  contextMiB?: number;
  maxModelLen?: number;
  /** Start asleep at level 1 instead of awake (vLLM itself always starts awake). */
  startAsleep?: boolean;
  /** What a `crash` fault does; the process runner kills the process. */
  onCrash: () => void;
}

type Tag = 'weights' | 'kv_cache';

/** Observable engine state (also served on `GET /_sim/state`). */
export interface FakeVllmState {
  model: string;
  sleeping: boolean;
  sleepingTags: Tag[];
  sleepLevel: 0 | 1 | 2;
  weightsValid: boolean;
  emptyAnswers: boolean;
  running: number;
  faults: VllmControl;
  /** The admin calls received, in order (`POST /wake_up?tags=weights`, ...). */
  calls: string[];
}

const SENTENCE = 'This is a simulated reply from the Haru GPU host simulator, served by a fake vLLM engine.';
const DEFAULT_MAX_TOKENS = 32;

/** Minimal reading of a request body: the whole body as a string. */
function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

/**
 * A fake vLLM OpenAI-compatible server for one model, faithful to vLLM's endpoints, status codes, error JSON
 * and SSE framing, with sleep mode (`/sleep`, `/wake_up` with tags, `/is_sleeping`, `/collective_rpc`,
 * `/reset_prefix_cache`) as vLLM serves it with `VLLM_SERVER_DEV_MODE=1`. Faults come from the control file
 * or `setFaults`.
 */
export function createFakeVllm(opts: FakeVllmOptions) {
  const created = Math.floor(Date.now() / 1000);
  const maxModelLen = opts.maxModelLen ?? 8192;
  const weightsMiB = opts.weightsMiB ?? 16_000;
  const kvCacheMiB = opts.kvCacheMiB ?? 8_000;
  const contextMiB = opts.contextMiB ?? 500;
  const sleepingTags = new Set<Tag>(opts.startAsleep ? ['weights', 'kv_cache'] : []);
  let sleepLevel: 0 | 1 | 2 = opts.startAsleep ? 1 : 0;
  let weightsValid = true;
  let emptyAnswers = false;
  let running = 0;
  let generated = 0;
  let promptTokens = 0;
  let succeeded = 0;
  let faults: VllmControl = NO_FAULTS;
  let manualFaults: VllmControl | null = null;
  let controlStamp = '';
  let listening = false;
  let crashed = false;
  let relisten: Promise<void> | null = null;
  const calls: string[] = [];
  const sockets = new Set<Socket>();

  function writeVram() {
    if (!opts.gpuStateDir) return;
    const used =
      contextMiB + (sleepingTags.has('weights') ? 0 : weightsMiB) + (sleepingTags.has('kv_cache') ? 0 : kvCacheMiB);
    setHolding(opts.gpuStateDir, { gpuIndex: opts.gpuIndex, usedMiB: used, label: 'python3' });
  }

  /** Re-reads the control file when it changed and applies refuse/crash. */
  function refreshFaults() {
    if (manualFaults) faults = manualFaults;
    else if (!opts.controlFile) faults = NO_FAULTS;
    else {
      let stamp = '';
      try {
        const st = statSync(opts.controlFile);
        stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
      } catch {
        stamp = 'missing';
      }
      if (stamp !== controlStamp) {
        controlStamp = stamp;
        faults = readControlFile(opts.controlFile);
      }
    }
    if (faults.crash && !crashed) {
      crashed = true;
      opts.onCrash();
    }
    if (faults.refuse && listening) stopListening();
    else if (!faults.refuse && !listening && boundPort !== null && !relisten) {
      relisten = startListening(boundPort)
        .catch(() => {}) // the port was taken meanwhile: the next refresh retries
        .finally(() => (relisten = null));
    }
  }

  const server = http.createServer((req, res) => {
    res.setHeader('server', 'uvicorn');
    refreshFaults();
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) send(res, 500, p.errorBody(err.message, 'InternalServerError', 500));
      else res.destroy();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  let boundPort: number | null = null;
  const poll = opts.controlFile ? setInterval(refreshFaults, 50) : null;
  // Not unref'd: while refusing connections, this poll is what keeps the process alive.

  function send(res: http.ServerResponse, status: number, body?: unknown) {
    if (body === undefined) {
      res.writeHead(status, { 'content-length': '0' }).end();
      return;
    }
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  }

  const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const tokenDelayMs = () => {
    const tps = faults.tokensPerSecond ?? opts.tokensPerSecond ?? 200;
    return Number.isFinite(tps) && tps > 0 ? 1000 / tps : 0;
  };

  /** The tokens the engine generates for one request (empty when the engine came back broken). */
  function generate(maxTokens: number): { tokens: string[]; finish: 'stop' | 'length' } {
    if (emptyAnswers || !weightsValid) return { tokens: [], finish: 'stop' };
    const all = SENTENCE.split(' ').map((w, i) => (i === 0 ? w : ` ${w}`));
    return maxTokens < all.length
      ? { tokens: all.slice(0, maxTokens), finish: 'length' }
      : { tokens: all, finish: 'stop' };
  }

  async function parseJson(
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<Record<string, unknown> | null> {
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

  /** The checks vLLM makes before any inference: model name, engine awake. Sends the error and returns false. */
  function admit(body: Record<string, unknown>, res: http.ServerResponse): boolean {
    const model = body.model ?? opts.model;
    if (model !== opts.model) {
      send(res, 404, p.errorBody(`The model \`${String(model)}\` does not exist.`, 'NotFoundError', 404, 'model'));
      return false;
    }
    if (sleepingTags.size > 0) {
      send(res, 503, p.errorBody('The engine is sleeping; wake it up first.', 'ServiceUnavailableError', 503));
      return false;
    }
    if (body.stream_options != null && body.stream !== true) {
      send(res, 400, p.errorBody('Stream options can only be defined when `stream=True`.', 'BadRequestError', 400));
      return false;
    }
    return true;
  }

  function maxTokensOf(body: Record<string, unknown>): number {
    const n = body.max_completion_tokens ?? body.max_tokens;
    return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : DEFAULT_MAX_TOKENS;
  }

  /** Streams SSE events, pacing tokens at the configured rate; ends with `data: [DONE]`. */
  async function stream(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    events: (emit: (data: unknown) => void, pace: () => Promise<void>) => Promise<void>,
  ) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    let closed = false;
    req.on('close', () => (closed = true));
    res.on('close', () => (closed = true));
    const emit = (data: unknown) => {
      if (!closed) res.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    const pace = async () => {
      const ms = tokenDelayMs();
      if (ms) await delay(ms);
      if (closed) throw new Error('client went away');
    };
    try {
      await events(emit, pace);
      if (!closed) res.end('data: [DONE]\n\n');
    } catch {
      res.destroy();
    }
  }

  async function inference(
    kind: 'chat' | 'completion' | 'embedding',
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ) {
    const body = await parseJson(req, res);
    if (!body || !admit(body, res)) return;
    if (kind === 'chat' && !Array.isArray(body.messages)) {
      send(res, 400, p.errorBody('messages: Field required', 'BadRequestError', 400, 'messages'));
      return;
    }
    if (kind === 'completion' && typeof body.prompt !== 'string' && !Array.isArray(body.prompt)) {
      send(res, 400, p.errorBody('prompt: Field required', 'BadRequestError', 400, 'prompt'));
      return;
    }
    if (kind === 'embedding' && typeof body.input !== 'string' && !Array.isArray(body.input)) {
      send(res, 400, p.errorBody('input: Field required', 'BadRequestError', 400, 'input'));
      return;
    }
    running += 1;
    let counted = true;
    const release = () => {
      if (counted) running -= 1;
      counted = false;
    };
    res.on('close', release);
    if (faults.hang) return; // never answers; the running slot frees when the client goes away
    try {
      if (kind === 'embedding') return embedding(body, res);
      const prompt =
        kind === 'chat'
          ? (body.messages as { content?: unknown }[]).reduce(
              (n, m) => n + (typeof m.content === 'string' ? words(m.content) : 1),
              0,
            )
          : [body.prompt].flat().reduce((n: number, s) => n + (typeof s === 'string' ? words(s) : 1), 0);
      const { tokens, finish } = generate(maxTokensOf(body));
      promptTokens += prompt;
      const so = (body.stream_options ?? {}) as { include_usage?: boolean; continuous_usage_stats?: boolean };
      if (body.stream === true) await streamed(kind, req, res, prompt, tokens, finish, so);
      else {
        for (let i = 0; i < tokens.length; i += 1) {
          const ms = tokenDelayMs();
          if (ms) await delay(ms);
        }
        const u = p.usage(prompt, tokens.length);
        const id = p.randomId(kind === 'chat' ? 'chatcmpl' : 'cmpl');
        const now = Math.floor(Date.now() / 1000);
        send(
          res,
          200,
          kind === 'chat'
            ? p.chatCompletion(id, now, opts.model, tokens.join(''), finish, u)
            : p.textCompletion(id, now, opts.model, tokens.join(''), finish, u),
        );
      }
      generated += tokens.length;
      succeeded += 1;
    } finally {
      release();
    }
  }

  async function streamed(
    kind: 'chat' | 'completion',
    req: http.IncomingMessage,
    res: http.ServerResponse,
    prompt: number,
    tokens: string[],
    finish: string,
    so: { include_usage?: boolean; continuous_usage_stats?: boolean },
  ) {
    const id = p.randomId(kind === 'chat' ? 'chatcmpl' : 'cmpl');
    const now = Math.floor(Date.now() / 1000);
    const m = opts.model;
    const live = (n: number) => (so.include_usage && so.continuous_usage_stats ? p.usage(prompt, n) : undefined);
    await stream(req, res, async (emit, pace) => {
      // vLLM's first chat chunk carries the role with empty content.
      if (kind === 'chat') emit(p.chatChunk(id, now, m, { role: 'assistant', content: '' }, null, live(0)));
      if (tokens.length === 0) {
        emit(
          kind === 'chat'
            ? p.chatChunk(id, now, m, { content: '' }, finish, live(0))
            : p.textChunk(id, now, m, '', finish, live(0)),
        );
      }
      for (let i = 0; i < tokens.length; i += 1) {
        await pace();
        const last = i === tokens.length - 1 ? finish : null;
        emit(
          kind === 'chat'
            ? p.chatChunk(id, now, m, { content: tokens[i]! }, last, live(i + 1))
            : p.textChunk(id, now, m, tokens[i]!, last, live(i + 1)),
        );
      }
      if (so.include_usage) {
        emit(
          p.usageChunk(
            id,
            kind === 'chat' ? 'chat.completion.chunk' : 'text_completion',
            now,
            m,
            p.usage(prompt, tokens.length),
          ),
        );
      }
    });
  }

  function embedding(body: Record<string, unknown>, res: http.ServerResponse) {
    const inputs = [body.input].flat().map((x) => (typeof x === 'string' ? x : JSON.stringify(x)));
    const vectors = inputs.map(p.embed);
    const asBase64 = body.encoding_format === 'base64';
    const tokens = inputs.reduce((n, s) => n + words(s), 0);
    promptTokens += tokens;
    send(res, 200, {
      id: p.randomId('embd'),
      object: 'list',
      created: Math.floor(Date.now() / 1000),
      model: opts.model,
      data: vectors.map((v, index) => ({
        index,
        object: 'embedding',
        embedding: asBase64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v,
      })),
      usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null },
    });
  }

  async function sleep(url: URL, res: http.ServerResponse) {
    const level = Number(url.searchParams.get('level') ?? '1');
    if (level !== 1 && level !== 2) {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error');
      return;
    }
    if (!faults.sleepNoop && sleepingTags.size === 0) {
      sleepingTags.add('weights').add('kv_cache');
      sleepLevel = level;
      if (level === 2) weightsValid = false; // discarded: garbage until reload_weights
      writeVram();
    }
    send(res, 200);
  }

  async function wakeUp(url: URL, res: http.ServerResponse) {
    const tags = url.searchParams.getAll('tags') as Tag[];
    const unknown = tags.filter((t) => t !== 'weights' && t !== 'kv_cache');
    if (unknown.length) {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error');
      return;
    }
    await delay(faults.wakeDelayMs ?? opts.wakeDelayMs ?? 0);
    if (!faults.wakeNoop) {
      for (const tag of tags.length ? tags : (['weights', 'kv_cache'] as Tag[])) sleepingTags.delete(tag);
      if (sleepingTags.size === 0) {
        sleepLevel = 0;
        if (faults.emptyContentAfterWake) emptyAnswers = true;
      }
      writeVram();
    }
    send(res, 200);
  }

  async function collectiveRpc(req: http.IncomingMessage, res: http.ServerResponse) {
    let body: { method?: unknown };
    try {
      body = JSON.parse(await readBody(req)) as { method?: unknown };
    } catch (err) {
      send(res, 400, { detail: `JSON decode error: ${(err as Error).message}` });
      return;
    }
    if (typeof body.method !== 'string') {
      send(res, 400, { detail: "Missing 'method' in request body" });
      return;
    }
    if (body.method !== 'reload_weights') {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error');
      return;
    }
    if (sleepingTags.has('weights')) {
      // vLLM cannot load into released weight buffers: the worker raises.
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error');
      return;
    }
    weightsValid = true;
    send(res, 200, { results: [null] });
  }

  function state(): FakeVllmState {
    return {
      model: opts.model,
      sleeping: sleepingTags.size > 0,
      sleepingTags: [...sleepingTags],
      sleepLevel,
      weightsValid,
      emptyAnswers,
      running,
      faults,
      calls: [...calls],
    };
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const route = `${req.method} ${url.pathname}`;
    if (
      !url.pathname.startsWith('/v1/') &&
      url.pathname !== '/metrics' &&
      url.pathname !== '/health' &&
      !url.pathname.startsWith('/_sim')
    ) {
      calls.push(`${req.method} ${url.pathname}${url.search}`);
      if (calls.length > 200) calls.shift();
    }
    switch (route) {
      case 'GET /health':
        return send(res, 200);
      case 'GET /version':
        return send(res, 200, { version: '0.11.0+haru.sim' });
      case 'GET /metrics':
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        return void res.end(
          p.metricsText(opts.model, { running, sleepLevel, generated, prompt: promptTokens, succeeded }),
        );
      case 'GET /v1/models':
        return send(res, 200, p.modelList(opts.model, created, maxModelLen));
      case 'POST /v1/chat/completions':
        return inference('chat', req, res);
      case 'POST /v1/completions':
        return inference('completion', req, res);
      case 'POST /v1/embeddings':
        return inference('embedding', req, res);
      case 'POST /sleep':
        return sleep(url, res);
      case 'POST /wake_up':
        return wakeUp(url, res);
      case 'GET /is_sleeping':
        return send(res, 200, { is_sleeping: sleepingTags.size > 0 });
      case 'POST /reset_prefix_cache':
        return send(res, 200);
      case 'POST /collective_rpc':
        return collectiveRpc(req, res);
      case 'GET /_sim/state':
        return send(res, 200, state());
      default:
        // FastAPI's answers for an unknown path and for a known path with the wrong method.
        if (KNOWN_PATHS.has(url.pathname)) return send(res, 405, { detail: 'Method Not Allowed' });
        return send(res, 404, { detail: 'Not Found' });
    }
  }

  function startListening(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        listening = true;
        boundPort = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  function stopListening() {
    listening = false;
    server.close();
    for (const socket of sockets) socket.destroy();
  }

  return {
    /** Starts listening and records the initial VRAM use. Resolves with the bound port. */
    async listen(): Promise<number> {
      await startListening(opts.port);
      writeVram();
      refreshFaults();
      return boundPort!;
    },
    /** Closes the listener, every connection and the control-file poll. */
    async close(): Promise<void> {
      if (poll) clearInterval(poll);
      boundPort = null;
      if (listening) stopListening();
    },
    /**
     * Replaces the faults in process (tests); overrides the control file until `setFaults(null)`. Resolves once
     * the listener matches the `refuse` fault.
     */
    async setFaults(control: VllmControlInput | null): Promise<void> {
      manualFaults = control ? vllmControlSchema.parse(control) : null;
      controlStamp = '';
      refreshFaults();
      await relisten;
    },
    state,
    get port() {
      return boundPort;
    },
  };
}
export type FakeVllm = ReturnType<typeof createFakeVllm>;

const KNOWN_PATHS = new Set([
  '/health',
  '/version',
  '/metrics',
  '/v1/models',
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/sleep',
  '/wake_up',
  '/is_sleeping',
  '/reset_prefix_cache',
  '/collective_rpc',
]);
