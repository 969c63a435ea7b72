/**
 * A light, steady client load through Haru's proxy: per fleet one client that sends a small chat completion,
 * waits for its answer, and sends the next once `everyMs` has passed since the last one started (at once when
 * the answer came later). Every request is recorded with when it started and ended and which domain served it,
 * so a failover's client-visible figures (first answer from the new active, errors after a kill) can be read
 * from them.
 */

/** One request as a client saw it. */
export interface ClientOutcome {
  fleet: string;
  startedAt: number;
  endedAt: number;
  /** HTTP status; 0 when no response came (connection refused or reset). */
  status: number;
  /** The domain that answered (`x-haru-domain`), null without one. */
  domain: string | null;
  /** Why it failed (status and body start, or the fetch error); null for a 2xx answer. */
  error: string | null;
}

export interface SteadyClients {
  outcomes: ClientOutcome[];
  /** Ends every client after its request in flight; resolves once all have ended. */
  stop(): Promise<void>;
}

async function oneRequest(apiUrl: string, fleet: string, model: string): Promise<ClientOutcome> {
  const startedAt = Date.now();
  try {
    const res = await fetch(`${apiUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-haru-fleet': fleet },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    });
    const body = await res.text();
    return {
      fleet,
      startedAt,
      endedAt: Date.now(),
      status: res.status,
      domain: res.headers.get('x-haru-domain'),
      error: res.ok ? null : `${res.status} ${body.slice(0, 200)}`,
    };
  } catch (err) {
    return { fleet, startedAt, endedAt: Date.now(), status: 0, domain: null, error: String(err) };
  }
}

/** Starts one client per fleet slug against the API at `apiUrl`. */
export function startSteadyClients(opts: {
  apiUrl: string;
  fleets: readonly string[];
  model: string;
  everyMs: number;
}): SteadyClients {
  const outcomes: ClientOutcome[] = [];
  let isStopping = false;
  let wake: (() => void)[] = [];
  // The pause between requests is the load's pacing, not a wait for a condition; `stop` cuts it short.
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = wake.filter((w) => w !== done);
        resolve();
      }
      wake.push(done);
    });
  const loops = opts.fleets.map(async (fleet, i) => {
    // Spread over the first interval, so the fleets' requests do not all start together.
    await pause((opts.everyMs * i) / opts.fleets.length);
    while (!isStopping) {
      const outcome = await oneRequest(opts.apiUrl, fleet, opts.model);
      outcomes.push(outcome);
      if (!isStopping) await pause(Math.max(0, outcome.startedAt + opts.everyMs - Date.now()));
    }
  });
  return {
    outcomes,
    async stop() {
      isStopping = true;
      for (const w of [...wake]) w();
      await Promise.all(loops);
    },
  };
}
