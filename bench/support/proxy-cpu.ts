import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase } from '../../db/testing';
import { eventually } from '../../test/support/eventually';
import { freePort } from '../../test/support/ports';
import { startBareForwarder } from './bare-forwarder';
import { startHaruProcess } from './processes';
import { answers, startBenchFleet } from './proxy-fleet';
import { load } from './proxy-load';
import { median } from './stats';

const MODEL = 'bench-model';
/** The small non-streaming chat completion of `bench:proxy`'s json loads. */
const JSON_BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });

export interface ProxyCpuFigures {
  /** Median over the rounds of the Haru API's CPU ms per request. */
  haruMs: number;
  /** The same for a bare Node forwarder in front of the same fake vLLM, in the same rounds. */
  bareNodeMs: number;
  rounds: {
    haru: { rps: number; cpuMs: number; errors: number };
    node: { rps: number; cpuMs: number; errors: number };
  }[];
}

/** Haru's proxy and a bare Node forwarder in front of one fake vLLM, ready to be loaded. */
export interface ProxyCpuBench {
  /**
   * CPU time per request of each under `connections` autocannon connections of small JSON chat completions:
   * a warm-up second each, then `rounds` rounds of `durationS` seconds per target, the order alternating by
   * round so a load change on the machine hits both alike (as `bench:proxy` and `bench:proxy-ab` measure it).
   * Throws when a request failed.
   */
  measure(opts: { rounds: number; durationS: number; connections: number }): Promise<ProxyCpuFigures>;
  stop(): Promise<void>;
}

/**
 * Starts a fresh database with a fleet whose active serves from one fake vLLM (`startBenchFleet`), `haru api`
 * in front of it as in `bench:proxy`, and the bare Node forwarder; resolves once both answer.
 */
export async function startProxyCpuBench(): Promise<ProxyCpuBench> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-proxy-cpu-'));
  const children: ChildProcess[] = [];
  const stops: (() => Promise<unknown>)[] = [async () => rmSync(dir, { recursive: true, force: true })];
  const stop = async () => {
    for (const fn of stops.reverse()) await fn().catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
  };
  try {
    const db = await createTestDatabase();
    stops.push(() => db.drop());
    const slug = `bench-proxy-cpu-${process.pid}`;
    const fleet = await startBenchFleet(db, { model: MODEL, slug, checkpointDir: dir, probeBody: JSON_BODY });
    children.push(fleet.vllm);
    const apiPort = await freePort();
    const nodePort = await freePort();
    const bare = startBareForwarder(`http://127.0.0.1:${fleet.vllmPort}`, nodePort);
    children.push(bare);
    const api = await startHaruProcess(
      'api',
      {
        PORT: String(apiPort),
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: '127.0.0.1:7233', // the proxy path never calls Temporal while the active serves
        HARU_DEFAULT_FLEET: slug,
        LOG_LEVEL: 'info',
      },
      'api listening',
    );
    stops.push(() => api.stop());
    const urls = {
      haru: `http://127.0.0.1:${apiPort}/v1/chat/completions`,
      node: `http://127.0.0.1:${nodePort}/v1/chat/completions`,
    };
    const pids = { haru: [api.pid], node: [bare.pid!] };
    await eventually('the Haru proxy', () => answers(urls.haru, JSON_BODY), 60_000, 100);
    await eventually('the bare Node forwarder', () => answers(urls.node, JSON_BODY), 60_000, 100);
    return {
      stop,
      async measure(opts) {
        const once = async (target: 'haru' | 'node', durationS: number) => {
          const r = await load(urls[target], JSON_BODY, opts.connections, durationS, {
            upstream: fleet.vllm.pid!,
            proxy: pids[target],
          });
          return { rps: r.rps, cpuMs: r.cpuPerRequestMs.proxy, errors: r.errors + r.non2xx };
        };
        await once('haru', 1); // warm-up: the JIT, the route table, keep-alive connections
        await once('node', 1);
        const rounds: ProxyCpuFigures['rounds'] = [];
        for (let round = 0; round < opts.rounds; round += 1) {
          const first = round % 2 ? 'node' : 'haru';
          const a = await once(first, opts.durationS);
          const b = await once(first === 'haru' ? 'node' : 'haru', opts.durationS);
          rounds.push(first === 'haru' ? { haru: a, node: b } : { haru: b, node: a });
        }
        const failed = rounds.reduce((n, r) => n + r.haru.errors + r.node.errors, 0);
        if (failed > 0) throw new Error(`${failed} requests failed under load: the CPU per request would be wrong`);
        return {
          haruMs: median(rounds.map((r) => r.haru.cpuMs))!,
          bareNodeMs: median(rounds.map((r) => r.node.cpuMs))!,
          rounds,
        };
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
