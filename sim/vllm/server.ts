import { statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { passesApiKeyGuard } from './auth';
import { NO_FAULTS, readControlFile, type VllmControl, type VllmControlInput, vllmControlSchema } from './control';
import { createEngine, type MemoryTag, type WakeTag } from './engine';
import { delay, internalServerError, readBody, send } from './http-util';
import { handleInference } from './inference';
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
  /** Control file with faults (see control.ts); re-read on every request and polled every 50 ms. */
  controlFile?: string;
  wakeDelayMs?: number;
  /** Generation speed; default 200. */
  tokensPerSecond?: number;
  /** VRAM of the weights and of the KV cache while awake, and of what stays when asleep (CUDA context, graph pools). */
  weightsMiB?: number;
  kvCacheMiB?: number;
  residueMiB?: number;
  maxModelLen?: number;
  /** `--lora-modules NAME=PATH …`: adapters served beside the base model, listed in /v1/models with `parent`. */
  loraModules?: { name: string; path: string }[];
  /** `--api-key` (or VLLM_API_KEY): a guarded path (sim/vllm/auth.ts) answers 401 without `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Every sleep takes this long; the first of the process `firstSleepDelayMs` more (see `sleep`). */
  sleepDelayMs?: number;
  firstSleepDelayMs?: number;
  /** What `GET /version` answers (default SIM_VLLM_VERSION). */
  vllmVersion?: string;
  /** Start asleep at level 1 instead of awake (vLLM itself always starts awake). */
  startAsleep?: boolean;
  /** `--max-num-seqs`: requests running at once; the rest wait. */
  maxNumSeqs?: number;
  /** What a `crash` fault does; the process runner kills the process. */
  onCrash: () => void;
}

/** Observable state (also served on `GET /_sim/state`). */
export interface FakeVllmState {
  model: string;
  sleeping: boolean;
  sleepingTags: MemoryTag[];
  /** A sleep (any level, 0 too) paused scheduling and no wake resumed it yet. */
  schedulerPaused: boolean;
  sleepLevel: 0 | 1 | 2;
  weightsValid: boolean;
  emptyAnswers: boolean;
  garbageWeights: boolean;
  running: number;
  /** Requests queued until the engine wakes or has a free sequence slot. */
  waiting: number;
  faults: VllmControl;
  /** The admin calls received, in order (`POST /wake_up?tags=weights`, ...). */
  calls: string[];
  /** Prefix-cache resets that succeeded. */
  prefixResets: number;
}

/**
 * The vLLM release whose sleep endpoints the simulator follows: `/sleep?mode=` (vllm-project/vllm#34528, first in
 * 0.17.0), level 0 and `tags=scheduling`.
 */
export const SIM_VLLM_VERSION = '0.17.1+haru.sim';

/** Paths vLLM serves: a wrong method on one of them is FastAPI's 405, anything else its 404. */
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
const isAdminPath = (path: string) =>
  KNOWN_PATHS.has(path) && !path.startsWith('/v1/') && !['/health', '/metrics', '/version'].includes(path);

/**
 * A fake vLLM OpenAI-compatible server for one model, faithful to vLLM's endpoints, status codes, error JSON
 * and SSE framing, with sleep mode (`/sleep`, `/wake_up` with tags, `/is_sleeping`, `/collective_rpc`,
 * `/reset_prefix_cache`) as vLLM serves it with `VLLM_SERVER_DEV_MODE=1`. Faults come from the control file
 * or `setFaults`.
 */
export function createFakeVllm(opts: FakeVllmOptions) {
  const created = Math.floor(Date.now() / 1000);
  const engine = createEngine({
    model: opts.model,
    gpuIndex: opts.gpuIndex,
    gpuStateDir: opts.gpuStateDir,
    weightsMiB: opts.weightsMiB ?? 16_000,
    kvCacheMiB: opts.kvCacheMiB ?? 8_000,
    residueMiB: opts.residueMiB ?? 500,
    startAsleep: opts.startAsleep,
    maxNumSeqs: opts.maxNumSeqs,
  });
  /**
   * Engine-core utility calls run one at a time, in arrival order: the API server sends each to the engine
   * core (vllm/v1/engine/core_client.py `call_utility_async`), whose busy loop handles them between steps
   * (vllm/v1/engine/core.py `_handle_client_request`). So `/is_sleeping` waits for a sleep or wake in progress.
   */
  let utilityTail: Promise<unknown> = Promise.resolve();
  function utility<T>(call: () => Promise<T> | T): Promise<T> {
    const next = utilityTail.then(call, call);
    utilityTail = next.catch(() => {});
    return next;
  }
  /** The event-loop lag a non-inference request sees now (the `adminLag*` knobs). */
  function lagMs(): number {
    const base = faults.adminLagMs ?? 0;
    const max = Math.max(base, faults.adminLagMaxMs ?? base);
    const load = engine.snapshot();
    return base + Math.random() * (max - base) + (faults.adminLagPerRequestMs ?? 0) * (load.running + load.waiting);
  }
  let faults: VllmControl = NO_FAULTS;
  let manualFaults: VllmControl | null = null;
  let controlStamp = '';
  let listening = false;
  let boundPort: number | null = null;
  let crashed = false;
  let relisten: Promise<void> | null = null;
  const calls: string[] = [];
  let resetFaultsSeen: VllmControl | null = null;
  let resetFailuresLeft = 0;
  let prefixResets = 0;
  const sockets = new Set<Socket>();

  /** Re-reads the control file when it changed, then applies crash and refuse. */
  function refreshFaults() {
    if (manualFaults) faults = manualFaults;
    else if (!opts.controlFile) faults = NO_FAULTS;
    else {
      let stamp = 'missing';
      try {
        const st = statSync(opts.controlFile);
        stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
      } catch {
        // no file: no faults
      }
      if (stamp !== controlStamp) {
        controlStamp = stamp;
        faults = readControlFile(opts.controlFile);
      }
    }
    if (faults.crash) crash();
    if (faults.refuse && listening) stopListening();
    else if (!faults.refuse && !listening && boundPort !== null && !relisten) {
      relisten = startListening(boundPort)
        .catch(() => {}) // the port was taken meanwhile: the next refresh retries
        .finally(() => (relisten = null));
    }
  }

  function crash() {
    if (crashed) return;
    crashed = true;
    opts.onCrash();
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
  // Not unref'd: while refusing connections, this poll is what keeps the process alive.
  const poll = opts.controlFile ? setInterval(refreshFaults, 50) : null;

  const inference = {
    model: opts.model,
    adapters: (opts.loraModules ?? []).map((m) => m.name),
    engine,
    isHanging: () => faults.hang,
    isErroring: () => faults.error,
    crashAfterTokens: () => faults.crashAfterTokens,
    crashAfterBodyBytes: () => faults.crashAfterBodyBytes,
    crash,
    tokenDelayMs: () => {
      const tps = faults.tokensPerSecond ?? opts.tokensPerSecond ?? 200;
      return Number.isFinite(tps) && tps > 0 ? 1000 / tps : 0;
    },
  };

  let sleptBefore = false;
  /**
   * `POST /sleep?level=N&mode=abort|wait` (vllm/entrypoints/serve/dev/sleep/api_router.py `sleep`: level defaults to
   * 1, mode to abort; the engine core takes levels 0-2 and raises ValueError for another mode, a 500). A sleep
   * copies the weights to pinned host memory (vllm/device_allocator/cumem.py `CuMemAllocator.sleep`); the first
   * one of a process also pays for allocating that pinned memory, which torch's caching host allocator keeps
   * for the sleeps after it: `firstSleepDelayMs` on top of `sleepDelayMs`. With `inprocEngine`, `wait` is the
   * ValueError an in-process engine raises.
   */
  async function sleep(url: URL, res: http.ServerResponse) {
    const level = Number(url.searchParams.get('level') ?? '1');
    const mode = url.searchParams.get('mode') ?? 'abort';
    if (level !== 0 && level !== 1 && level !== 2) return internalServerError(res); // vLLM's int() raises
    if (mode !== 'abort' && mode !== 'wait') return internalServerError(res);
    if (mode === 'wait' && faults.inprocEngine) return internalServerError(res);
    const first = level > 0 && !sleptBefore;
    await delay(
      (faults.sleepDelayMs ?? opts.sleepDelayMs ?? 0) +
        (first ? (faults.firstSleepDelayMs ?? opts.firstSleepDelayMs ?? 0) : 0),
    );
    if (!faults.sleepNoop) {
      await engine.sleep(level, mode);
      if (level > 0) sleptBefore = true;
    }
    send(res, 200);
  }

  /**
   * `POST /wake_up?tags=...` (vllm/entrypoints/serve/dev/sleep/api_router.py `wake_up`, no tags: all). Tags are not
   * validated: `scheduling` resumes a level-0 sleep, and a tag that is not asleep only makes the executor warn.
   */
  async function wakeUp(url: URL, res: http.ServerResponse) {
    const tags = url.searchParams.getAll('tags') as WakeTag[];
    await delay(faults.wakeDelayMs ?? opts.wakeDelayMs ?? 0);
    if (!faults.wakeNoop) {
      engine.wake(tags, {
        emptyAfter: faults.emptyContentAfterWake,
        garbageAfter: faults.garbageAfterWake,
      });
    }
    send(res, 200);
  }

  function collectiveRpc(text: string, res: http.ServerResponse) {
    let body: { method?: unknown };
    try {
      body = JSON.parse(text) as { method?: unknown };
    } catch (err) {
      return send(res, 400, { detail: `JSON decode error: ${(err as Error).message}` });
    }
    if (typeof body.method !== 'string') return send(res, 400, { detail: "Missing 'method' in request body" });
    // Any other method, or reloading into released weight buffers, raises in the worker.
    if (body.method !== 'reload_weights' || !engine.reloadWeights()) return internalServerError(res);
    send(res, 200, { results: [null] });
  }

  /** Answers `{"success": bool}`: false for as many calls as the `prefixResetFailures` fault asks since it was set. */
  function resetPrefixCache(res: http.ServerResponse) {
    if (faults !== resetFaultsSeen) [resetFaultsSeen, resetFailuresLeft] = [faults, faults.prefixResetFailures];
    if (resetFailuresLeft > 0) {
      resetFailuresLeft -= 1;
      return send(res, 200, { success: false });
    }
    prefixResets += 1;
    send(res, 200, { success: true });
  }

  function state(): FakeVllmState {
    return { model: opts.model, ...engine.snapshot(), faults, calls: [...calls], prefixResets };
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (isAdminPath(url.pathname)) {
      calls.push(`${req.method} ${url.pathname}${url.search}`);
      if (calls.length > 200) calls.shift();
    }
    const isInference = req.method === 'POST' && url.pathname.startsWith('/v1/') && url.pathname !== '/v1/models';
    if (!isInference && url.pathname !== '/_sim/state') await delay(lagMs());
    // vLLM's AuthenticationMiddleware (sim/vllm/auth.ts): a guarded path without the key is 401 before routing.
    const request = { method: req.method, pathname: url.pathname, authorization: req.headers.authorization };
    if (!passesApiKeyGuard(request, opts.apiKey ? [opts.apiKey] : [])) return send(res, 401, { error: 'Unauthorized' });
    switch (`${req.method} ${url.pathname}`) {
      case 'GET /health':
        return send(res, 200);
      case 'GET /version':
        return send(res, 200, { version: faults.vllmVersion ?? opts.vllmVersion ?? SIM_VLLM_VERSION });
      case 'GET /metrics':
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        return void res.end(engine.metrics());
      case 'GET /v1/models':
        return send(res, 200, p.modelList(opts.model, created, opts.maxModelLen ?? 8192, opts.loraModules ?? []));
      case 'POST /v1/chat/completions':
        return handleInference('chat', req, res, inference);
      case 'POST /v1/completions':
        return handleInference('completion', req, res, inference);
      case 'POST /v1/embeddings':
        return handleInference('embedding', req, res, inference);
      case 'POST /sleep':
        return utility(() => sleep(url, res));
      case 'POST /wake_up':
        return utility(() => wakeUp(url, res));
      case 'GET /is_sleeping':
        return utility(() => send(res, 200, { is_sleeping: engine.sleeping }));
      case 'POST /reset_prefix_cache':
        return utility(() => resetPrefixCache(res));
      case 'POST /collective_rpc': {
        const body = await readBody(req);
        return utility(() => collectiveRpc(body, res));
      }
      case 'GET /_sim/state':
        return send(res, 200, state());
      default:
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
      engine.writeVram();
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
