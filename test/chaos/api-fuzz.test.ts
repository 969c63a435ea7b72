/**
 * Chaos: property-based fuzzing of the whole API from its own OpenAPI document with schemathesis (from
 * PyPI, into a project-local virtualenv under .haru/). The API runs as `haru api` composes it, on Postgres
 * and the Temporal dev server, with a seeded fleet whose active domain is a fake vLLM. Every generated
 * request must get an answer within the request timeout that is not a 5xx.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, seedLayout, type TestDatabase } from '../../db/testing';
import { createFakeVllm, type FakeVllm } from '../../sim/vllm/server';
import { uniqueSlug } from '../api/support/harness';
import { uniqueTaskQueue } from '../workflows/support/temporal';
import { type ChaosApi, startChaosApi } from './support/api';
import { ensureSchemathesis, SCHEMATHESIS_VERSION } from './support/schemathesis';

jest.setTimeout(900_000);

let db: TestDatabase | undefined;
let api: ChaosApi | undefined;
let vllm: FakeVllm | undefined;
let reportDir: string | undefined;
afterAll(async () => {
  await api?.close();
  await vllm?.close();
  await db?.drop();
  if (reportDir) rmSync(reportDir, { recursive: true, force: true });
});

interface FuzzReport {
  requests: number;
  statuses: Record<string, number>;
  /** Requests without a response (timeout or connection error): a hang or a crash. */
  unanswered: string[];
  serverErrors: string[];
  failedChecks: string[];
  /** Errors schemathesis or Hypothesis raised while generating cases, with no request behind them. */
  toolErrors: string[];
}

/** Reads schemathesis's NDJSON event log: every request it sent, its answer, and every check result. */
function readReport(file: string): FuzzReport {
  const report: FuzzReport = {
    requests: 0,
    statuses: {},
    unanswered: [],
    serverErrors: [],
    failedChecks: [],
    toolErrors: [],
  };
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const event = JSON.parse(line) as {
      ScenarioFinished?: { recorder: FuzzRecorder };
      NonFatalError?: { label: string; phase: string; value: { type?: string; message?: string } };
    };
    if (event.NonFatalError) {
      const e = event.NonFatalError;
      report.toolErrors.push(`${e.label} (${e.phase}): ${e.value.type}: ${(e.value.message ?? '').slice(0, 120)}`);
    }
    const recorder = event.ScenarioFinished?.recorder;
    for (const [id, interaction] of Object.entries(recorder?.interactions ?? {})) {
      report.requests += 1;
      const what = `${interaction.request.method} ${interaction.request.uri}`;
      const status = interaction.response?.status_code;
      if (status === undefined) report.unanswered.push(what);
      else {
        report.statuses[status] = (report.statuses[status] ?? 0) + 1;
        if (status >= 500) report.serverErrors.push(`${what} -> ${status}`);
      }
      for (const check of recorder!.checks?.[id] ?? []) {
        if (check.status !== 'success') report.failedChecks.push(`${what}: ${check.name} ${check.status}`);
      }
    }
  }
  return report;
}

interface FuzzRecorder {
  interactions?: Record<string, { request: { method: string; uri: string }; response: { status_code: number } | null }>;
  checks?: Record<string, { name: string; status: string }[]>;
}

/** Runs `st` and resolves with its exit code and output (a failing run is a result here, not an error). */
function schemathesis(st: string, args: string[], timeoutMs: number) {
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    execFile(
      st,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
        resolve({ code: typeof code === 'number' ? code : null, output: `${stdout}\n${stderr}` });
      },
    );
  });
}

it('answers every request generated from /openapi.json without a 5xx or a hang', async () => {
  const st = await ensureSchemathesis();
  vllm = createFakeVllm({ model: 'fuzz-model', port: 0, gpuIndex: 0, onCrash: () => undefined });
  const vllmPort = await vllm.listen();
  db = await createTestDatabase();
  const slug = uniqueSlug('fuzz');
  const servingUrl = `http://127.0.0.1:${vllmPort}/v1`;
  const domain = (name: string) => ({
    slug: name,
    supervisorUrl: 'http://127.0.0.1:9',
    slots: [
      { kind: 'inference' as const, gpuIndex: 0, models: [{ name: 'fuzz-model', servingUrl }] },
      { kind: 'training' as const, gpuIndex: 0, command: ['true'], checkpointDir: `/tmp/haru-fuzz/${name}` },
    ],
  });
  const { fleetId } = await seedLayout(db.store, {
    fleet: { slug, activeDomain: 'east', policy: { autoFailover: false } },
    domains: [domain('east'), domain('west')],
  });
  for (const d of (await db.store.fleets.snapshot(fleetId))!.domains) await db.store.domains.transition(d.id, 'ready');
  api = await startChaosApi({
    databaseUrl: db.url,
    temporalAddress: process.env.TEMPORAL_TEST_ADDRESS!,
    taskQueue: uniqueTaskQueue('chaos-fuzz'),
    // Proxy requests without X-Haru-Fleet reach the seeded fleet, so bodies get as far as the fake vLLM.
    config: { HARU_DEFAULT_FLEET: slug, HARU_CHAT_HEADER_TIMEOUT_MS: 5_000 },
  });

  reportDir = mkdtempSync(path.join(os.tmpdir(), 'haru-fuzz-'));
  const ndjson = path.join(reportDir, 'events.ndjson');
  const config = path.join(reportDir, 'schemathesis.toml');
  writeFileSync(
    config,
    [
      '[parameters]',
      // `follow=1` asks for an endless SSE stream by design: the route is fuzzed in its JSON form.
      '"query.follow" = "0"',
      // Half the requests name the seeded fleet, so they reach past the fleet lookup.
      '"path.fleet" = { dictionary = "fleets", probability = 0.5 }',
      '[dictionaries.fleets]',
      `values = ["${slug}"]`,
      '',
    ].join('\n'),
  );
  const { code, output } = await schemathesis(
    st,
    [
      '--config-file',
      config,
      'run',
      `${api.url}/openapi.json`,
      '--checks',
      'not_a_server_error',
      '--request-timeout',
      '10',
      '--max-examples',
      '30',
      '--seed',
      '20261130',
      '--generation-database',
      'none',
      '--workers',
      '2',
      '--no-color',
      '--report',
      'ndjson',
      '--report-ndjson-path',
      ndjson,
    ],
    600_000,
  );
  if (process.env.HARU_FUZZ_OUTPUT) writeFileSync(process.env.HARU_FUZZ_OUTPUT, output);
  expect(code === 0 || code === 1).toBe(true); // 2+ is a usage or schema-loading error of the tool itself
  const report = readReport(ndjson);
  const generated = /Test cases:\s*\n\s*(\d+) generated/.exec(output)?.[1] ?? '?';
  console.log(
    `schemathesis ${SCHEMATHESIS_VERSION}: ${generated} test cases generated, ${report.requests} requests sent, ` +
      `statuses ${JSON.stringify(report.statuses)}` +
      (report.toolErrors.length ? `; fuzzer-internal errors (not API answers): ${report.toolErrors.join(' | ')}` : ''),
  );
  expect(report.requests).toBeGreaterThan(0);
  expect(report.unanswered).toEqual([]);
  expect(report.serverErrors).toEqual([]);
  expect(report.failedChecks).toEqual([]);
});
