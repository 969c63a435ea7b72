/**
 * Proxy benchmark: the same OpenAI requests sent straight to a fake vLLM, through Haru's proxy (`haru api`),
 * through nginx as a reverse proxy and through a bare Node forwarder (the floor of any Node proxy), all on
 * loopback, with autocannon as the load generator. Small non-streaming chat completions and SSE streams;
 * throughput, p50/p99 latency, and the ratios Haru/direct and Haru/nginx. Installs Debian's nginx with
 * apt-get when it is missing.
 *
 *   npm run bench:proxy -- [--connections 16] [--duration 10] [--rounds 3] [--probe-requests 500]
 *
 * Two loads per target and kind: `--connections` concurrent connections (throughput, loaded latency) and a
 * single connection (unloaded latency). Latency figures come from every response's own time (autocannon's
 * `response` event, a float in ms), not from autocannon's histogram, which stores whole milliseconds. Then
 * a sequential probe: one keep-alive undici connection per target, the targets taking turns request by
 * request (so a load change on the machine hits all alike), each timed with `process.hrtime.bigint()` from
 * the request to the last body byte. The proxy's added latency is Haru minus direct in that probe.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { Client } from 'undici';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createTestDatabase } from '../db/testing';
import { freePort } from '../test/support/ports';
import { startBareForwarder } from './support/bare-forwarder';
import { childPids } from './support/cpu';
import { startHaruProcess } from './support/processes';
import { answers, startBenchFleet } from './support/proxy-fleet';
import { load, type Pids } from './support/proxy-load';
import { printTable, writeResult } from './support/report';
import { eventually } from '../test/support/eventually';
import { fmt, mean, median, percentile } from './support/stats';

const { values: args } = parseArgs({
  options: {
    connections: { type: 'string', default: '16' },
    duration: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    /** Sequential requests per target and round in the probe. */
    'probe-requests': { type: 'string', default: '500' },
    'stream-tokens': { type: 'string', default: '16' },
    /** Write a V8 CPU profile of the Haru API process here (json load through Haru only). */
    'profile-dir': { type: 'string' },
  },
});
const CONNECTIONS = Number(args.connections);
const DURATION_S = Number(args.duration);
const ROUNDS = Number(args.rounds);
const STREAM_TOKENS = Number(args['stream-tokens']);
const PROBE_REQUESTS = Number(args['probe-requests']);
const MODEL = 'bench-model';

/** `node`: a bare Node forwarder (http server + undici, no routing, auth or metrics), the floor of any Node proxy. */
type Target = 'direct' | 'haru' | 'nginx' | 'node';
type Kind = 'json' | 'sse';

type Sample = { target: Target; kind: Kind } & Awaited<ReturnType<typeof load>>;
type ProbeSample = { kind: Kind; round: number } & Awaited<ReturnType<typeof probe>>;

const bodies: Record<Kind, string> = {
  json: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
  sse: JSON.stringify({
    model: MODEL,
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: STREAM_TOKENS,
    stream: true,
  }),
};

/**
 * Sequential requests, one keep-alive connection per target, the targets taking turns: each request timed
 * with `process.hrtime.bigint()` from sending to the last body byte (ms with the fraction). The added
 * latency is the median of the per-turn differences (proxy minus direct) and the difference of the means.
 */
async function probe(urls: Record<Target, string>, kind: Kind, requests: number) {
  const clients = Object.fromEntries(
    (Object.keys(urls) as Target[]).map((t) => [t, new Client(new URL(urls[t]).origin, { pipelining: 1 })]),
  ) as Record<Target, Client>;
  const times = { direct: [], haru: [], nginx: [], node: [] } as Record<Target, number[]>;
  const once = async (target: Target) => {
    const started = process.hrtime.bigint();
    const res = await clients[target].request({
      path: new URL(urls[target]).pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: bodies[kind],
    });
    for await (const _chunk of res.body); // to the last byte
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (res.statusCode !== 200) throw new Error(`probe ${target}: HTTP ${res.statusCode}`);
    return ms;
  };
  try {
    for (const t of Object.keys(urls) as Target[]) for (let i = 0; i < 20; i += 1) await once(t); // warm-up
    for (let i = 0; i < requests; i += 1) {
      // Rotate the order so no target always follows the same one.
      const order = (Object.keys(urls) as Target[]).map((_, j, all) => all[(i + j) % all.length]!);
      for (const t of order) times[t].push(await once(t));
    }
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
  }
  const stats = (t: Target) => ({
    p50: percentile(times[t], 50),
    p99: percentile(times[t], 99),
    mean: mean(times[t]),
  });
  const added = (t: Target) => ({
    p50OfDifferences: median(times[t].map((ms, i) => ms - times.direct[i]!)),
    differenceOfP50: stats(t).p50! - stats('direct').p50!,
    differenceOfMeans: stats(t).mean! - stats('direct').mean!,
  });
  return {
    requests,
    direct: stats('direct'),
    haru: stats('haru'),
    nginx: stats('nginx'),
    node: stats('node'),
    addedMs: { haru: added('haru'), nginx: added('nginx'), node: added('node') },
  };
}

/** Debian's nginx: installed with apt-get when `nginx` is not on the machine. */
function ensureNginx(): string {
  for (const bin of ['/usr/sbin/nginx', '/usr/bin/nginx']) if (existsSync(bin)) return bin;
  process.stdout.write('nginx not found: installing Debian nginx with apt-get\n');
  const apt = (...a: string[]) =>
    execFileSync('apt-get', a, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    apt('install', '-y', '--no-install-recommends', 'nginx');
  } catch {
    apt('update');
    apt('install', '-y', '--no-install-recommends', 'nginx');
  }
  for (const bin of ['/usr/sbin/nginx', '/usr/bin/nginx']) if (existsSync(bin)) return bin;
  throw new Error('apt-get install nginx did not provide an nginx binary');
}

/** nginx as a plain reverse proxy: one worker (Haru's API is one process), keep-alive upstream, no buffering. */
function startNginx(dir: string, port: number, upstreamPort: number): ChildProcess {
  mkdirSync(path.join(dir, 'logs'), { recursive: true });
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream vllm { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://vllm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`,
  );
  return spawn(ensureNginx(), ['-p', dir, '-c', conf, '-e', path.join(dir, 'logs', 'error.log')], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'haru-bench-proxy-'));
  const children: ChildProcess[] = [];
  const db = await createTestDatabase();
  const stops: (() => Promise<unknown>)[] = [() => db.drop()];
  try {
    // The upstream: one fake vLLM process, generation as fast as its timers allow, behind a seeded fleet.
    const slug = `bench-proxy-${process.pid}`;
    const { vllm, vllmPort, direct } = await startBenchFleet(db, {
      model: MODEL,
      slug,
      checkpointDir: dir,
      probeBody: bodies.json,
    });
    children.push(vllm);
    const apiPort = await freePort();
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
      { nodeArgs: args['profile-dir'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(args['profile-dir'])}`] : [] },
    );
    stops.push(() => api.stop());
    const haru = `http://127.0.0.1:${apiPort}/v1/chat/completions`;
    await eventually('the Haru proxy', () => answers(haru, bodies.json), 60_000, 100);

    if (args['profile-dir']) {
      const s = await load(haru, bodies.json, CONNECTIONS, DURATION_S, { upstream: vllm.pid!, proxy: [api.pid] });
      process.stdout.write(`profiled json haru c=${CONNECTIONS}: ${fmt(s.rps)} req/s, p50 ${s.p50} ms\n`);
      await api.stop(); // the profile is written when the process exits
      return;
    }
    const nginxPort = await freePort();
    const nginx = startNginx(path.join(dir, 'nginx'), nginxPort, vllmPort);
    children.push(nginx);
    const viaNginx = `http://127.0.0.1:${nginxPort}/v1/chat/completions`;
    await eventually('nginx', () => answers(viaNginx, bodies.json), 60_000, 100);

    const nodePort = await freePort();
    const bare = startBareForwarder(`http://127.0.0.1:${vllmPort}`, nodePort);
    children.push(bare);
    const viaNode = `http://127.0.0.1:${nodePort}/v1/chat/completions`;
    await eventually('the bare Node forwarder', () => answers(viaNode, bodies.json), 60_000, 100);

    const urls: Record<Target, string> = { direct, haru, nginx: viaNginx, node: viaNode };
    await eventually('nginx workers', () => childPids(nginx.pid!).length > 0);
    const pids: Record<Target, Pids> = {
      direct: { upstream: vllm.pid!, proxy: [] },
      haru: { upstream: vllm.pid!, proxy: [api.pid] },
      nginx: { upstream: vllm.pid!, proxy: childPids(nginx.pid!) },
      node: { upstream: vllm.pid!, proxy: [bare.pid!] },
    };
    const samples: Sample[] = [];
    const probes: ProbeSample[] = [];
    for (const kind of ['json', 'sse'] as Kind[]) {
      for (const target of Object.keys(urls) as Target[])
        await load(urls[target], bodies[kind], CONNECTIONS, 2, pids[target]); // warm-up
      // Rounds interleave the targets so a load change on the machine hits all three alike.
      for (let round = 1; round <= ROUNDS; round += 1) {
        for (const target of Object.keys(urls) as Target[]) {
          for (const connections of [CONNECTIONS, 1]) {
            const s = {
              target,
              kind,
              ...(await load(urls[target], bodies[kind], connections, DURATION_S, pids[target])),
            };
            samples.push(s);
            process.stdout.write(
              `${kind} ${target} c=${connections} round ${round}: ${fmt(s.rps)} req/s, ` +
                `p50 ${fmt(s.p50, 2)} ms, p99 ${fmt(s.p99, 2)} ms, mean ${fmt(s.mean, 2)} ms` +
                `${s.errors || s.non2xx ? `, errors ${s.errors}, non-2xx ${s.non2xx}` : ''}\n`,
            );
          }
        }
        const p = { kind, round, ...(await probe(urls, kind, PROBE_REQUESTS)) };
        probes.push(p);
        process.stdout.write(
          `${kind} probe round ${round} (${PROBE_REQUESTS} sequential each, p50 ms): direct ${fmt(p.direct.p50, 2)}, ` +
            `haru ${fmt(p.haru.p50, 2)}, nginx ${fmt(p.nginx.p50, 2)}, node ${fmt(p.node.p50, 2)}; added p50 haru ` +
            `${fmt(p.addedMs.haru.p50OfDifferences, 2)}, nginx ${fmt(p.addedMs.nginx.p50OfDifferences, 2)}, ` +
            `node ${fmt(p.addedMs.node.p50OfDifferences, 2)}; ` +
            `load average ${os.loadavg()[0]!.toFixed(2)}\n`,
        );
      }
    }

    const med = (target: Target, kind: Kind, connections: number, f: (s: Sample) => number | null) =>
      median(samples.filter((s) => s.target === target && s.kind === kind && s.connections === connections).map(f));
    const medProbe = (kind: Kind, f: (p: ProbeSample) => number | null) =>
      median(probes.filter((p) => p.kind === kind).map(f));
    const rows: (string | number)[][] = [];
    const summary: Record<string, unknown> = {};
    for (const kind of ['json', 'sse'] as Kind[]) {
      for (const target of Object.keys(urls) as Target[]) {
        const figures = {
          rps: med(target, kind, CONNECTIONS, (s) => s.rps),
          p50: med(target, kind, CONNECTIONS, (s) => s.p50),
          p99: med(target, kind, CONNECTIONS, (s) => s.p99),
          p50Single: med(target, kind, 1, (s) => s.p50),
          meanSingle: med(target, kind, 1, (s) => s.mean),
          p99Single: med(target, kind, 1, (s) => s.p99),
          probeP50: medProbe(kind, (p) => p[target].p50),
          probeMean: medProbe(kind, (p) => p[target].mean),
          errors: samples
            .filter((s) => s.target === target && s.kind === kind)
            .reduce((n, s) => n + s.errors + s.non2xx, 0),
          cpuPerRequestMs: {
            loadGenerator: med(target, kind, CONNECTIONS, (s) => s.cpuPerRequestMs.loadGenerator),
            proxy: med(target, kind, CONNECTIONS, (s) => s.cpuPerRequestMs.proxy),
            upstream: med(target, kind, CONNECTIONS, (s) => s.cpuPerRequestMs.upstream),
          },
        };
        summary[`${kind}/${target}`] = figures;
        rows.push([
          `${kind} ${target}`,
          fmt(figures.rps),
          fmt(figures.p50, 2),
          fmt(figures.p99, 2),
          fmt(figures.p50Single, 2),
          fmt(figures.meanSingle, 2),
          fmt(figures.probeP50, 2),
          fmt(figures.probeMean, 2),
          figures.errors,
          fmt(figures.cpuPerRequestMs.loadGenerator, 3),
          fmt(figures.cpuPerRequestMs.proxy, 3),
          fmt(figures.cpuPerRequestMs.upstream, 3),
          // What the machine's cores could carry if every process on the path were CPU-bound.
          fmt(
            (os.cpus().length /
              (figures.cpuPerRequestMs.loadGenerator! +
                figures.cpuPerRequestMs.proxy! +
                figures.cpuPerRequestMs.upstream!)) *
              1000,
          ),
        ]);
      }
      const get = (t: Target, k: string) => (summary[`${kind}/${t}`] as Record<string, number>)[k]!;
      const ratios = {
        throughputHaruOverDirect: get('haru', 'rps') / get('direct', 'rps'),
        throughputHaruOverNginx: get('haru', 'rps') / get('nginx', 'rps'),
        addedP50LoadedMs: get('haru', 'p50') - get('direct', 'p50'),
        addedP50SingleMs: get('haru', 'p50Single') - get('direct', 'p50Single'),
        addedMeanSingleMs: get('haru', 'meanSingle') - get('direct', 'meanSingle'),
        nginxAddedP50SingleMs: get('nginx', 'p50Single') - get('direct', 'p50Single'),
        nginxAddedMeanSingleMs: get('nginx', 'meanSingle') - get('direct', 'meanSingle'),
        /** The probe's median of per-turn differences (Haru minus direct), median over rounds. */
        addedProbeP50Ms: medProbe(kind, (p) => p.addedMs.haru.p50OfDifferences),
        addedProbeMeanMs: medProbe(kind, (p) => p.addedMs.haru.differenceOfMeans),
        nginxAddedProbeP50Ms: medProbe(kind, (p) => p.addedMs.nginx.p50OfDifferences),
        nginxAddedProbeMeanMs: medProbe(kind, (p) => p.addedMs.nginx.differenceOfMeans),
        nodeAddedProbeP50Ms: medProbe(kind, (p) => p.addedMs.node.p50OfDifferences),
        nodeAddedProbeMeanMs: medProbe(kind, (p) => p.addedMs.node.differenceOfMeans),
        throughputNodeOverDirect: get('node', 'rps') / get('direct', 'rps'),
      };
      summary[`${kind}/ratios`] = ratios;
      const plus = (v: number | null) => `${v !== null && v >= 0 ? '+' : ''}${fmt(v, 2)}`;
      rows.push([
        `${kind} Haru/direct, Haru/nginx (rps)`,
        `${fmt(ratios.throughputHaruOverDirect, 2)}, ${fmt(ratios.throughputHaruOverNginx, 2)}`,
        plus(ratios.addedP50LoadedMs),
        '',
        plus(ratios.addedP50SingleMs),
        plus(ratios.addedMeanSingleMs),
        plus(ratios.addedProbeP50Ms),
        plus(ratios.addedProbeMeanMs),
        '',
        '',
        '',
        '',
        '',
      ]);
      rows.push([
        `${kind} nginx added (ms)`,
        '',
        '',
        '',
        plus(ratios.nginxAddedP50SingleMs),
        plus(ratios.nginxAddedMeanSingleMs),
        plus(ratios.nginxAddedProbeP50Ms),
        plus(ratios.nginxAddedProbeMeanMs),
        '',
        '',
        '',
        '',
        '',
      ]);
      rows.push([
        `${kind} bare Node added (ms); rps/direct`,
        fmt(ratios.throughputNodeOverDirect, 2),
        '',
        '',
        '',
        '',
        plus(ratios.nodeAddedProbeP50Ms),
        plus(ratios.nodeAddedProbeMeanMs),
        '',
        '',
        '',
        '',
        '',
      ]);
    }
    printTable(
      `proxy: ${ROUNDS} rounds x ${DURATION_S} s, medians; loaded = ${CONNECTIONS} connections, single = 1 connection, ` +
        `probe = ${PROBE_REQUESTS} sequential requests per target and round (latency ms; added = Haru minus direct, ` +
        `probe p50 column = median of per-request differences)`,
      [
        'target',
        'req/s',
        'p50',
        'p99',
        'p50 single',
        'mean single',
        'probe p50',
        'probe mean',
        'errors',
        'cpu/req gen',
        'cpu/req proxy',
        'cpu/req vllm',
        'cpu bound req/s',
      ],
      rows,
    );
    const file = writeResult('proxy', {
      options: {
        connections: CONNECTIONS,
        durationS: DURATION_S,
        rounds: ROUNDS,
        streamTokens: STREAM_TOKENS,
        probeRequests: PROBE_REQUESTS,
      },
      nginx: spawnSync(ensureNginx(), ['-v'], { encoding: 'utf8' }).stderr.trim(),
      summary,
      samples,
      probes,
    });
    process.stdout.write(`\nwritten: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    for (const child of children) child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:proxy failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
