/**
 * Whether a model server reports its engine asleep, asked only when routing is stale (the store is
 * unreachable, so a promotion and the old active's sleep may have happened unseen). vLLM queues a request
 * in a sleeping engine until a wake that may never come, so the proxy must not send one there.
 */
export interface SleepCheck {
  /**
   * True when the server behind `servingUrl` answers `GET /is_sleeping` with `{"is_sleeping": true}`. False
   * when it says awake, and also when it cannot say (unreachable, the endpoint not exposed by a gateway): the
   * forward itself then finds a dead server. Answers are kept `ttlMs` per server.
   */
  isAsleep(servingUrl: string): Promise<boolean>;
}

/** The vLLM server root of a model's servingUrl (a base that may end in `/v1`). */
export function serverRoot(servingUrl: string): string {
  const url = new URL(servingUrl);
  url.pathname = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  url.search = '';
  url.hash = '';
  return url.toString().replace(/\/+$/, '');
}

/** Creates the check; `fetch` and `now` are injectable, `timeoutMs` bounds one ask. */
export function createSleepCheck(opts: {
  ttlMs: number;
  timeoutMs: number;
  fetch?: typeof fetch;
  now?: () => number;
}): SleepCheck {
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  const answers = new Map<string, { asleep: boolean; at: number }>();
  const inflight = new Map<string, Promise<boolean>>();

  async function ask(root: string): Promise<boolean> {
    try {
      const res = await doFetch(`${root}/is_sleeping`, { signal: AbortSignal.timeout(opts.timeoutMs) });
      if (!res.ok) {
        await res.body?.cancel();
        return false;
      }
      const body = (await res.json()) as { is_sleeping?: unknown };
      return body?.is_sleeping === true;
    } catch {
      return false;
    }
  }

  return {
    async isAsleep(servingUrl) {
      const root = serverRoot(servingUrl);
      const known = answers.get(root);
      if (known && now() - known.at < opts.ttlMs) return known.asleep;
      let p = inflight.get(root);
      if (!p) {
        p = ask(root).then((asleep) => {
          if (answers.size >= 1024) answers.clear();
          answers.set(root, { asleep, at: now() });
          inflight.delete(root);
          return asleep;
        });
        inflight.set(root, p);
      }
      return p;
    },
  };
}
