/**
 * The `haru dev` composition root: the whole stack on one machine. Reads the environment, checks every
 * port before starting anything, then starts in order the Temporal dev server (unless TEMPORAL_ADDRESS),
 * the state store (embedded PGlite unless DATABASE_URL), the simulated domains (child process groups),
 * the worker and the API in this process, the fleet monitors, puts the standbys into standby posture, and
 * prints the banner. Stops everything in reverse order on SIGINT/SIGTERM (a second signal kills at once).
 */
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import YAML from 'yaml';
import { loadApiConfig } from '../../api/config';
import { createApp } from '../../api/app';
import { createJsonLogger } from '../../api/logger';
import { createApiMetrics } from '../../api/metrics';
import { createTemporalOrchestrator } from '../../api/orchestrator';
import { createDatabase } from '../../db/client';
import { dbConfigFromEnv, describeDatabase } from '../../db/config';
import { applyLayout, validateLayout } from '../../db/layout-apply';
import { migrate } from '../../db/migrate';
import { createStore, type Store } from '../../db/store';
import { killSimDomain } from '../../sim/domain';
import { ConfigError } from '../../schemas/env';
import { formatProblems } from '../../schemas/issues';
import type { FleetLayout } from '../../schemas/layout';
import { loadWorkerConfig } from '../../workers/config';
import { createWorkerLogger } from '../../workers/logger';
import { createWorkerMetrics } from '../../workers/metrics';
import { ensureSearchAttributes } from '../../workers/search-attributes';
import { ensureMonitor } from '../../workers/start';
import { createHaruWorker } from '../../workers/worker';
import { monitorWorkflowId, resumeAutoFailoverSignal } from '../../workflows/definitions';
import { createApiClient } from '../api-client';
import { startTemporalDevServer } from '../temporal-dev-server';
import { findTemporalCli, PROJECT_ROOT } from '../temporal-cli';
import { renderBanner } from './banner';
import { type ManagedChild, signalGroup } from './children';
import { loadDevConfig } from './config';
import { simStateDir, startSimDomainProcess } from './domains';
import { startEventTail } from './event-tail';
import { buildDevLayout } from './layout';
import { assertPortsFree, duplicatePorts, planPorts } from './ports';
import { createDevRegistry } from './registry';
import { waitForFleetSettled } from './observe';
import { waitFor } from './wait';

export interface DevIo {
  out(line: string): void;
  err(line: string): void;
}

/** A running dev stack. */
export interface RunningDevStack {
  apiUrl: string;
  fleetId: string;
  banner: string;
  /** Resolves with the reason when a part of the stack dies for good (the worker, the Temporal server). */
  failed: Promise<Error>;
  /** Stops everything this stack started, in reverse order. Idempotent. */
  close(): Promise<void>;
  /** SIGKILLs every child process group at once (a second Ctrl-C). */
  kill(): void;
}

/** Tries to listen on 127.0.0.1:`port`; false when something else holds it. */
export function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function readLayout(file: string): FleetLayout {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read the dev layout ${file} (HARU_DEV_LAYOUT): ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = /\.ya?ml$/i.test(file) ? YAML.parse(text) : JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`the dev layout ${file} does not parse: ${(err as Error).message}`);
  }
  const validation = validateLayout(json);
  if (!validation.ok) throw new ConfigError(`invalid fleet layout ${file}:\n${formatProblems(validation.problems)}`);
  return validation.layout;
}

/** How a path is shown to the user: relative to where they run commands when inside it. */
const display = (cwd: string, p: string) => {
  const rel = path.relative(cwd, p);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : p;
};

/** The parts' configurations, all parsed before anything starts so a bad variable changes nothing. */
function configure(env: NodeJS.ProcessEnv, cwd: string) {
  const config = loadDevConfig(env, cwd, PROJECT_ROOT);
  const e = config.env;
  const shared = {
    TEMPORAL_ADDRESS: config.temporalAddress,
    TEMPORAL_NAMESPACE: e.TEMPORAL_NAMESPACE,
    HARU_TASK_QUEUE: e.HARU_TASK_QUEUE,
    DATABASE_URL: e.DATABASE_URL ?? '',
    HARU_DATA_DIR: config.stateDir,
    LOG_LEVEL: e.LOG_LEVEL,
  };
  const source = readLayout(config.layoutFile);
  const layout = buildDevLayout(source, { portOffset: e.HARU_SIM_PORT_OFFSET, stateDir: config.stateDir });
  const api = loadApiConfig({
    ...env,
    ...shared,
    PORT: String(e.PORT),
    HOST: '127.0.0.1', // the dev stack never leaves this machine, token or not
    HARU_API_TOKEN: e.HARU_API_TOKEN ?? '',
    HARU_DEFAULT_FLEET: env.HARU_DEFAULT_FLEET?.trim() || layout.fleet.slug,
  });
  const worker = loadWorkerConfig({
    ...env,
    ...shared,
    HARU_WORKER_METRICS_PORT: String(e.HARU_WORKER_METRICS_PORT),
    HARU_WORKER_METRICS_HOST: '127.0.0.1',
    HARU_SUPERVISOR_TOKEN: e.HARU_SUPERVISOR_TOKEN ?? '',
  });
  return { config, layout, api, worker };
}

type Closer = { what: string; fn: () => Promise<unknown> };

/** Runs closers in reverse, each bounded so one stuck part cannot keep the others running. */
async function runClosers(closers: Closer[], io: DevIo, timeoutMs = 30_000): Promise<void> {
  for (const closer of closers.splice(0).reverse()) {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => {
      timer = setTimeout(() => r('timeout'), timeoutMs);
    });
    const result = await Promise.race([closer.fn().then(() => 'ok' as const), timeout]).catch((err: Error) => err);
    clearTimeout(timer);
    if (result === 'timeout') io.err(`haru dev: stopping ${closer.what} timed out`);
    else if (result instanceof Error) io.err(`haru dev: stopping ${closer.what} failed: ${result.message}`);
  }
}

/**
 * Starts the whole dev stack and resolves once it is ready and the banner is printed. Throws ConfigError
 * for bad configuration or a busy port (nothing started then), or the first start failure (everything
 * already started is stopped again). `abort` cancels a start in progress.
 */
export async function startDevStack(
  env: NodeJS.ProcessEnv,
  io: DevIo,
  opts: { cwd?: string; abort?: AbortSignal } = {},
): Promise<RunningDevStack> {
  const cwd = opts.cwd ?? process.cwd();
  const { config, layout, api: apiConfig, worker: workerConfig } = configure(env, cwd);
  const e = config.env;
  const checkAbort = () => {
    if (opts.abort?.aborted) throw new Error('start interrupted');
  };

  const plan = planPorts(config, layout);
  const duplicates = duplicatePorts(plan);
  if (duplicates.length) throw new ConfigError(duplicates.join('\n'));
  const registry = createDevRegistry(config.stateDir);
  const leftovers = registry.claim();
  if (leftovers.length) {
    for (const d of layout.domains) await killSimDomain(simStateDir(config.stateDir, d.slug));
    io.out(`stopped processes left by an earlier haru dev: ${leftovers.join(', ')}`);
    await waitFor(
      'their ports to be released',
      async () =>
        (await assertPortsFree(plan, isPortFree).then(
          () => true,
          () => false,
        ))
          ? true
          : undefined,
      { timeoutMs: 10_000 },
    ).catch(() => undefined);
  }
  try {
    await assertPortsFree(plan, isPortFree);
  } catch (err) {
    registry.release();
    throw err;
  }

  const closers: Closer[] = [{ what: 'the process registry', fn: async () => registry.release() }];
  const children = new Map<string, ManagedChild>();
  /** Every process group started (for a second Ctrl-C). */
  const groups = new Set<number>();
  let closing = false;
  let reportFailure: (err: Error) => void = () => {};
  const failed = new Promise<Error>((resolve) => {
    reportFailure = resolve;
  });
  const stateLabel = display(cwd, config.stateDir);
  try {
    mkdirSync(config.logDir, { recursive: true });
    mkdirSync(path.dirname(config.generatedLayoutFile), { recursive: true });
    writeFileSync(config.generatedLayoutFile, `${JSON.stringify(layout, null, 2)}\n`);
    const appLog = createWriteStream(path.join(config.logDir, 'haru.log'), { flags: 'a' });
    closers.push({ what: 'the log', fn: () => new Promise<void>((r) => appLog.end(() => r())) });
    const writeLog = (line: string) => {
      if (!appLog.writableEnded) appLog.write(line);
    };
    io.out(`haru dev: state in ${stateLabel}, logs in ${display(cwd, config.logDir)}`);

    // Temporal first: everything after it needs the server.
    let temporalUiUrl: string | null = e.HARU_TEMPORAL_UI_URL ?? null;
    if (config.startsTemporal) {
      const temporalLog = createWriteStream(path.join(config.logDir, 'temporal.log'), { flags: 'a' });
      closers.push({ what: 'the Temporal log', fn: () => new Promise<void>((r) => temporalLog.end(() => r())) });
      const server = await startTemporalDevServer({
        port: e.HARU_TEMPORAL_PORT,
        uiPort: e.HARU_TEMPORAL_UI_PORT,
        dbFilename: path.join(config.stateDir, 'temporal.db'),
        detached: true,
        logStream: temporalLog,
        namespaces: e.TEMPORAL_NAMESPACE === 'default' ? [] : [e.TEMPORAL_NAMESPACE],
        startTimeoutMs: 120_000,
      });
      groups.add(server.process.pid!);
      registry.add('temporal dev server', server.process.pid!, 'start-dev');
      closers.push({ what: 'the Temporal dev server', fn: () => server.stop() });
      void server.process.once('exit', (code, signal) => {
        if (!closing)
          reportFailure(
            new Error(
              `the Temporal dev server exited (${signal ?? `code ${code}`}); see ${display(cwd, path.join(config.logDir, 'temporal.log'))}`,
            ),
          );
      });
      temporalUiUrl = server.uiUrl;
      io.out(`  temporal dev server  ${server.address}, Web UI ${server.uiUrl}`);
    } else {
      io.out(`  temporal             ${config.temporalAddress} (TEMPORAL_ADDRESS)`);
    }
    checkAbort();

    const dbConfig = dbConfigFromEnv({ DATABASE_URL: e.DATABASE_URL, HARU_STATE_DIR: config.stateDir }, cwd);
    const database = await createDatabase(dbConfig);
    closers.push({ what: 'the state store', fn: () => database.close() });
    await migrate(database);
    const store = createStore(database);
    const applied = await applyLayout(store, layout);
    io.out(
      `  state store          ${describeDatabase(dbConfig)}; fleet ${applied.fleetSlug}: ${applied.created.length} created, ${applied.updated.length} updated`,
    );
    checkAbort();

    // Domains before the worker: the monitor's first poll then finds them up.
    closers.push({
      what: 'the simulated domains',
      fn: async () => {
        await Promise.all([...children.values()].map((c) => c.stop(20_000)));
        // Whatever outlived its `haru sim domain` (a stop that timed out) carries the domain's marker.
        for (const d of layout.domains) await killSimDomain(simStateDir(config.stateDir, d.slug));
      },
    });
    const domainsStartedAt = new Date();
    const eventCursor = await latestEventId(store, applied.fleetId);
    const initial = await store.fleets.snapshot(applied.fleetId);
    const activeSlug = initial?.domains.find((d) => d.id === initial.activeDomainId)?.slug ?? layout.fleet.activeDomain;
    const starts = await Promise.allSettled(
      layout.domains.map(async (domain) => {
        const child = await startSimDomainProcess(
          {
            spawn,
            projectRoot: PROJECT_ROOT,
            layoutFile: config.generatedLayoutFile,
            stateDir: config.stateDir,
            env,
            logFile: path.join(config.logDir, `sim-${domain.slug}.log`),
            onSpawn: (pid) => {
              groups.add(pid);
              registry.add(`simulated domain ${domain.slug}`, pid, 'sim');
            },
          },
          domain,
          domain.slug !== activeSlug,
        );
        children.set(domain.slug, child);
        void child.exited.then((exit) => {
          registry.remove(child.pid);
          if (!closing) io.out(`simulated domain ${domain.slug} is gone (${exit.signal ?? `exit code ${exit.code}`})`);
        });
      }),
    );
    const startFailure = starts.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (startFailure) throw startFailure.reason;
    io.out(`  simulated domains    ${layout.domains.map((d) => `${d.slug} (${d.supervisorUrl})`).join(', ')}`);
    checkAbort();

    // The worker, in this process. Signals are ours: the Runtime's own handlers would stop it behind our back.
    const workerLogger = createWorkerLogger(workerConfig.LOG_LEVEL, writeLog);
    Runtime.install({ logger: workerLogger, shutdownSignals: [] });
    const nativeConnection = await NativeConnection.connect({ address: config.temporalAddress });
    closers.push({ what: 'the worker connection', fn: () => nativeConnection.close() });
    await ensureSearchAttributes(nativeConnection, e.TEMPORAL_NAMESPACE).catch((err: Error) =>
      io.err(`haru dev: search attributes not checked: ${err.message}`),
    );
    const metrics = createWorkerMetrics({ withDefaults: false });
    const worker = await createHaruWorker({
      connection: nativeConnection,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.HARU_TASK_QUEUE,
      store,
      supervisorToken: workerConfig.HARU_SUPERVISOR_TOKEN,
      workflowBundle: workerConfig.HARU_WORKFLOW_BUNDLE
        ? { codePath: path.resolve(cwd, workerConfig.HARU_WORKFLOW_BUNDLE) }
        : undefined,
      metrics,
    });
    const workerDone = worker.run();
    workerDone.then(
      () => {
        if (!closing) reportFailure(new Error('the worker stopped'));
      },
      (err: Error) => reportFailure(new Error(`the worker failed: ${err.message}`)),
    );
    closers.push({
      what: 'the worker',
      fn: async () => {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await workerDone.catch(() => undefined);
      },
    });
    const metricsServer = http.createServer((req, res) => {
      if (req.method !== 'GET' || req.url !== '/metrics') return void res.writeHead(404).end();
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    });
    await listen(metricsServer, workerConfig.HARU_WORKER_METRICS_PORT);
    closers.push({ what: 'the worker metrics endpoint', fn: () => closeServer(metricsServer) });
    const temporalClient = new Client({ connection: nativeConnection, namespace: e.TEMPORAL_NAMESPACE });
    const fleetId = applied.fleetId;
    await ensureMonitor(temporalClient, fleetId, e.HARU_TASK_QUEUE);
    // A pause signalled in an earlier run survives in the monitor's state: the dev stack starts with it on.
    await temporalClient.workflow.getHandle(monitorWorkflowId(fleetId)).signal(resumeAutoFailoverSignal);
    io.out(`  worker               task queue ${e.HARU_TASK_QUEUE}, monitor haru/${fleetId}/monitor`);
    checkAbort();

    // The API, in this process, on the same state store (PGlite serves one process only).
    const apiConnection = Connection.lazy({ address: config.temporalAddress });
    closers.push({ what: 'the API connection', fn: () => apiConnection.close() });
    const apiApp = createApp({
      store,
      database,
      orchestrator: createTemporalOrchestrator({
        client: new Client({ connection: apiConnection, namespace: e.TEMPORAL_NAMESPACE }),
        connection: apiConnection,
        taskQueue: e.HARU_TASK_QUEUE,
        timeoutMs: apiConfig.HARU_TEMPORAL_TIMEOUT_MS,
      }),
      config: apiConfig,
      logger: createJsonLogger({ level: apiConfig.LOG_LEVEL, write: writeLog, base: { service: 'haru-api' } }),
      metrics: createApiMetrics({ withDefaults: true }),
    });
    await apiApp.start();
    closers.push({ what: 'the API', fn: () => apiApp.close() });
    const apiServer = http.createServer(apiApp.app);
    apiServer.keepAliveTimeout = 65_000;
    await listen(apiServer, apiConfig.PORT);
    closers.push({ what: 'the API server', fn: () => closeServer(apiServer) });
    const apiUrl = `http://127.0.0.1:${apiConfig.PORT}`;
    const client = createApiClient({ HARU_URL: apiUrl, HARU_API_TOKEN: apiConfig.HARU_API_TOKEN });
    await waitFor(`${apiUrl}/readyz`, async () => ((await fetch(`${apiUrl}/readyz`)).ok ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    io.out(`  api                  ${apiUrl} (default fleet ${apiConfig.HARU_DEFAULT_FLEET})`);
    checkAbort();

    // From here on the terminal narrates the fleet: what the monitor does at start, then every failover.
    const tail = startEventTail(
      { list: (after) => store.events.list(fleetId, { after, limit: 100 }), write: (l) => io.out(l) },
      eventCursor,
    );
    closers.push({ what: 'the event tail', fn: () => tail.stop() });
    const { snapshot, settled } = await waitForFleetSettled(client, layout.fleet.slug, domainsStartedAt, 120_000);
    if (!settled)
      io.err(`haru dev: fleet ${snapshot.slug} has not settled yet (an operation in flight, or a failed active)`);
    for (const d of snapshot.domains) {
      if (d.state !== 'ready')
        io.err(`haru dev: domain ${d.slug} is ${d.state}${d.lastError ? `: ${d.lastError}` : ''}`);
    }
    const active = snapshot.domains.find((d) => d.id === snapshot.activeDomainId);
    const activeLayout = layout.domains.find((d) => d.slug === active?.slug) ?? layout.domains[0]!;
    const model =
      activeLayout.slots.flatMap((s) => (s.kind === 'inference' ? s.models.map((m) => m.name) : []))[0] ?? 'model';
    const temporal = findTemporalCli(env);
    const haru = `node ${display(cwd, path.join(PROJECT_ROOT, 'bin', 'haru.js'))}`;
    const activeSlugNow = active?.slug ?? activeSlug;
    // Named outright: `haru sim kill --domain X` would look in .haru/sim/X of wherever it runs.
    const simDir = display(cwd, simStateDir(config.stateDir, activeSlugNow));
    const banner = renderBanner({
      apiUrl,
      temporalUiUrl,
      temporalAddress: config.temporalAddress,
      namespace: e.TEMPORAL_NAMESPACE,
      fleetSlug: snapshot.slug,
      fleetId: snapshot.id,
      activeDomain: active?.slug ?? 'none',
      standbyDomains: snapshot.domains.filter((d) => d.id !== snapshot.activeDomainId).map((d) => d.slug),
      routeRevision: snapshot.routeRevision,
      model,
      haru,
      killCommand: `${haru} sim kill --state-dir ${simDir}`,
      reviveCommand: `${haru} sim domain --layout ${display(cwd, config.generatedLayoutFile)} --domain ${activeSlugNow} --state-dir ${simDir} --standby`,
      temporal: temporal ? display(cwd, temporal) : 'temporal',
      stateDir: stateLabel,
      logFile: display(cwd, path.join(config.logDir, 'haru.log')),
      databaseLabel: e.DATABASE_URL ? 'Postgres at DATABASE_URL' : 'embedded Postgres',
      hasApiToken: !!apiConfig.HARU_API_TOKEN,
      cliEnv: apiConfig.PORT === 8700 ? '' : `HARU_URL=${apiUrl} `,
    });
    io.out(banner);

    let closingPromise: Promise<void> | undefined;
    return {
      apiUrl,
      fleetId,
      banner,
      failed,
      close() {
        closing = true;
        closingPromise ??= runClosers(closers, io);
        return closingPromise;
      },
      kill() {
        for (const pgid of groups) signalGroup(pgid, 'SIGKILL');
      },
    };
  } catch (err) {
    closing = true;
    await runClosers(closers, io);
    throw err;
  }
}

/** The id of the fleet's newest event (0 when none), so the tail starts after what an earlier run wrote. */
async function latestEventId(store: Store, fleetId: string): Promise<number> {
  let after = 0;
  for (;;) {
    const page = await store.events.list(fleetId, { after, limit: 1_000 });
    if (page.length === 0) return after;
    after = page.at(-1)!.id;
  }
}

function listen(server: http.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** `haru dev`: runs until SIGINT/SIGTERM, then stops everything it started (a second signal kills at once). */
export async function main(): Promise<void> {
  const io: DevIo = {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  };
  const abort = new AbortController();
  let stack: RunningDevStack | undefined;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      io.err(`haru dev: ${signal} again, killing everything now`);
      stack?.kill();
      process.exit(130);
    }
    io.err(`haru dev: ${signal}, stopping (press Ctrl-C again to kill at once)`);
    abort.abort();
    if (stack)
      void stack.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    stack = await startDevStack(process.env, io, { abort: abort.signal });
  } catch (err) {
    if (abort.signal.aborted) process.exit(130); // stopped during start: everything started is stopped again
    throw err;
  }
  if (abort.signal.aborted) {
    await stack.close();
    process.exit(0);
  }
  void stack.failed.then(async (err) => {
    io.err(`haru dev: ${err.message}; stopping`);
    await stack?.close();
    process.exit(1);
  });
}
