/**
 * A/B of two Haru API builds on one machine: the same fake vLLM behind two `haru api` processes started
 * from two checkouts (or one checkout with two environments), measured in interleaved turns so a load
 * change on a shared machine hits both alike. Answers "did this change make the proxy faster" where
 * `bench:proxy`'s figures from different hours cannot.
 *
 *   npm run bench:proxy-ab -- --a-root /tmp/haru-base [--b-root .] [--a-env K=V,K=V] [--b-env …]
 *     [--rounds 5] [--probe-requests 400] [--connections 16] [--duration 5] [--kind json|sse]
 *
 * Per round: a sequential probe (one keep-alive undici connection per target; direct, A and B take turns
 * request by request; added latency = median of per-turn differences to direct), then `--connections`
 * autocannon load on A and on B (order alternating by round) for throughput and the API's CPU ms per
 * request. A checkout for `--a-root` from a commit: `git archive <commit> | tar -x -C DIR` and a
 * `node_modules` symlink to this checkout's.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'undici';
import { createTestDatabase } from '../db/testing';
import { eventually } from '../test/support/eventually';
import { freePort } from '../test/support/ports';
import { startHaruProcess } from './support/processes';
import { answers, startBenchFleet } from './support/proxy-fleet';
import { load } from './support/proxy-load';
import { printTable, writeResult } from './support/report';
import { fmt, median, percentile } from './support/stats';

const { values: args } = parseArgs({
  options: {
    'a-root': { type: 'string' },
    'b-root': { type: 'string', default: '.' },
    'a-env': { type: 'string', default: '' },
    'b-env': { type: 'string', default: '' },
    rounds: { type: 'string', default: '5' },
    'probe-requests': { type: 'string', default: '400' },
    connections: { type: 'string', default: '16' },
    duration: { type: 'string', default: '5' },
    kind: { type: 'string', default: 'json' },
  },
});
const MODEL = 'bench-model';
const ROUNDS = Number(args.rounds);
const PROBE_REQUESTS = Number(args['probe-requests']);
const body = JSON.stringify({
  model: MODEL,
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: args.kind === 'sse' ? 16 : 4,
  ...(args.kind === 'sse' ? { stream: true } : {}),
});

type Side = 'a' | 'b';
const envOf = (spec: string): Record<string, string> =>
  Object.fromEntries(
    spec
      .split(',')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );

async function timed(client: Client, pathname: string): Promise<number> {
  const started = process.hrtime.bigint();
  const res = await client.request({
    path: pathname,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  for await (const _chunk of res.body); // to the last byte
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Sequential turns direct, A, B (rotated); the added ms per side as the median of per-turn differences. */
async function probe(urls: Record<'direct' | Side, string>) {
  const names = Object.keys(urls) as ('direct' | Side)[];
  const clients = Object.fromEntries(names.map((n) => [n, new Client(new URL(urls[n]).origin)])) as Record<
    string,
    Client
  >;
  const times: Record<'direct' | Side, number[]> = { direct: [], a: [], b: [] };
  const path_ = new URL(urls.direct).pathname;
  try {
    for (const n of names) for (let i = 0; i < 20; i += 1) await timed(clients[n]!, path_);
    for (let i = 0; i < PROBE_REQUESTS; i += 1) {
      for (let j = 0; j < names.length; j += 1) {
        const n = names[(i + j) % names.length]!;
        times[n].push(await timed(clients[n]!, path_));
      }
    }
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
  }
  const added = (s: Side) => median(times[s].map((ms, i) => ms - times.direct[i]!));
  return { directP50: percentile(times.direct, 50), addedA: added('a'), addedB: added('b') };
}

/** `--connections` autocannon load on one build: its throughput and the API's CPU ms per request. */
async function loadOn(url: string, pid: number, upstreamPid: number) {
  const r = await load(url, body, Number(args.connections), Number(args.duration), {
    upstream: upstreamPid,
    proxy: [pid],
  });
  return { rps: r.rps, cpuPerRequestMs: r.cpuPerRequestMs.proxy, errors: r.errors + r.non2xx };
}

async function main(): Promise<void> {
  if (!args['a-root']) throw new Error('--a-root is required (the checkout of build A)');
  const roots: Record<Side, string> = { a: path.resolve(args['a-root']), b: path.resolve(args['b-root']) };
  const children: ChildProcess[] = [];
  const db = await createTestDatabase();
  const stops: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    const slug = `bench-proxy-ab-${process.pid}`;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-proxy-ab-'));
    stops.push(async () => rmSync(dir, { recursive: true, force: true }));
    const { vllm, direct } = await startBenchFleet(db, { model: MODEL, slug, checkpointDir: dir, probeBody: body });
    children.push(vllm);
    const ok = (url: string) => answers(url, body);
    const urls = { direct } as Record<'direct' | Side, string>;
    const pids = {} as Record<Side, number>;
    for (const side of ['a', 'b'] as Side[]) {
      const port = await freePort();
      const api = await startHaruProcess(
        'api',
        {
          PORT: String(port),
          DATABASE_URL: db.url,
          TEMPORAL_ADDRESS: '127.0.0.1:7233',
          HARU_DEFAULT_FLEET: slug,
          LOG_LEVEL: 'info',
          ...envOf(args[`${side}-env`]!),
        },
        'api listening',
        { root: roots[side] },
      );
      stops.push(() => api.stop());
      pids[side] = api.pid;
      urls[side] = `http://127.0.0.1:${port}/v1/chat/completions`;
      await eventually(`Haru ${side}`, () => ok(urls[side]), 60_000, 100);
    }
    type Round = Awaited<ReturnType<typeof probe>> & {
      round: number;
      loads: Record<Side, Awaited<ReturnType<typeof loadOn>>>;
      loadAverage: number;
    };
    const rounds: Round[] = [];
    for (let round = 1; round <= ROUNDS; round += 1) {
      const p = await probe(urls);
      const order: Side[] = round % 2 ? ['a', 'b'] : ['b', 'a'];
      const loads = {} as Record<Side, Awaited<ReturnType<typeof loadOn>>>;
      for (const side of order) loads[side] = await loadOn(urls[side], pids[side], vllm.pid!);
      const r: Round = { round, ...p, loads, loadAverage: os.loadavg()[0]! };
      rounds.push(r);
      process.stdout.write(
        `round ${round}: added p50 A ${fmt(p.addedA, 3)} ms, B ${fmt(p.addedB, 3)} ms (direct p50 ${fmt(p.directP50, 2)}); ` +
          `rps A ${fmt(loads.a.rps)}, B ${fmt(loads.b.rps)}; cpu/req A ${fmt(loads.a.cpuPerRequestMs, 3)}, ` +
          `B ${fmt(loads.b.cpuPerRequestMs, 3)} ms; load average ${r.loadAverage.toFixed(2)}\n`,
      );
    }
    const med = (f: (r: Round) => number | null) => median(rounds.map(f));
    printTable(
      `proxy A/B (${args.kind}): ${ROUNDS} rounds, medians; A = ${roots.a} ${args['a-env']}, B = ${roots.b} ${args['b-env']}`,
      ['build', 'added p50 ms (probe)', `req/s (${args.connections} conns)`, 'API cpu ms/req'],
      (['a', 'b'] as Side[]).map((s) => [
        s.toUpperCase(),
        fmt(
          med((r) => (s === 'a' ? r.addedA : r.addedB)),
          3,
        ),
        fmt(med((r) => r.loads[s].rps)),
        fmt(
          med((r) => r.loads[s].cpuPerRequestMs),
          3,
        ),
      ]),
    );
    const file = writeResult('proxy-ab', { options: args, roots, rounds });
    process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:proxy-ab failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
