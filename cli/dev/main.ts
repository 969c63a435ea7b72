/**
 * The `haru dev` composition root: the whole stack on one machine. Parses every setting and checks every
 * port before starting anything, then starts in order the Temporal dev server (unless TEMPORAL_ADDRESS),
 * the state store (embedded PGlite unless DATABASE_URL), the simulated domains (child process groups), the
 * worker and the API in this process, and prints the banner once the fleet has settled. Stops everything
 * in reverse order on SIGINT/SIGTERM; a second signal kills every process group at once.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { monitorTaskQueue } from '../../core/task-queues';
import { createDatabase, type HaruDatabase } from '../../db/client';
import { dbConfigFromEnv, describeDatabase } from '../../db/config';
import { applyLayout, type LayoutApplyReport } from '../../db/layout-apply';
import { migrate } from '../../db/migrate';
import { createStore, type Store } from '../../db/store';
import type { FleetSnapshot } from '../../schemas/entities';
import { ConfigError } from '../../schemas/env';
import { killSimDomain, simDomainMarker } from '../../sim/domain';
import { createApiClient } from '../api-client';
import { startTemporalDevServer } from '../temporal-dev-server';
import { findTemporalCli, PROJECT_ROOT } from '../temporal-cli';
import { startDevApi } from './api-part';
import { type BannerInfo, renderBanner } from './banner';
import { type ManagedChild, signalGroup } from './children';
import { type Closer, runClosers } from './closers';
import { configureDevStack, type DevSetup, displayPath } from './configure';
import { simStateDir, startSimDomains } from './domains';
import { latestEventId, startEventTail } from './event-tail';
import { waitForFleetSettled } from './observe';
import { assertPortsFree, duplicatePorts, planPorts } from './ports';
import { createDevRegistry, type DevRegistryHandle } from './registry';
import { isPortFree } from './servers';
import { waitFor } from './wait';
import { startDevWorker } from './worker-part';

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

/**
 * Claims the state directory and makes sure every port is free; nothing is started when this throws.
 * Processes left by a `haru dev` that died without stopping them are ended first (their ports would be busy).
 */
async function preflight(setup: DevSetup, io: DevIo): Promise<DevRegistryHandle> {
  const { config, layout } = setup;
  const plan = planPorts(config, layout);
  const duplicates = duplicatePorts(plan);
  if (duplicates.length) throw new ConfigError(duplicates.join('\n'));
  const registry = createDevRegistry(config.stateDir);
  const leftovers = registry.claim();
  if (leftovers.length) {
    for (const d of layout.domains) await killSimDomain(simStateDir(config.stateDir, d.slug));
    io.out(`stopped processes left by an earlier haru dev: ${leftovers.join(', ')}`);
    const free = () =>
      assertPortsFree(plan, isPortFree).then(
        () => true as const,
        () => undefined,
      );
    await waitFor('their ports to be released', free, { timeoutMs: 10_000 }).catch(() => undefined);
  }
  try {
    await assertPortsFree(plan, isPortFree);
  } catch (err) {
    registry.release();
    throw err;
  }
  return registry;
}

/** Opens the state store, migrates it and applies the layout. */
async function openStore(setup: DevSetup, cwd: string, closers: Closer[]) {
  const { config, layout } = setup;
  const dbConfig = dbConfigFromEnv({ ...config.env, HARU_STATE_DIR: config.stateDir }, cwd);
  const database: HaruDatabase = await createDatabase(dbConfig);
  closers.push({ what: 'the state store', fn: () => database.close() });
  await migrate(database);
  const store: Store = createStore(database);
  const applied: LayoutApplyReport = await applyLayout(store, layout);
  return { database, store, applied, label: describeDatabase(dbConfig) };
}

/**
 * Starts the whole dev stack and resolves once it is ready and the banner is printed. Throws ConfigError
 * for bad configuration, PortInUseError for a busy port (nothing started then), or the first start
 * failure (everything already started is stopped again). `abort` cancels a start in progress; `groups`
 * receives every child process group as it starts (to kill them even before this resolves).
 */
export async function startDevStack(
  env: NodeJS.ProcessEnv,
  io: DevIo,
  opts: { cwd?: string; abort?: AbortSignal; groups?: Set<number> } = {},
): Promise<RunningDevStack> {
  const cwd = opts.cwd ?? process.cwd();
  const setup = configureDevStack(env, cwd, PROJECT_ROOT);
  const { config, layout } = setup;
  const e = config.env;
  const show = (p: string) => displayPath(cwd, p);
  const checkAbort = () => {
    if (opts.abort?.aborted) throw new Error('start interrupted');
  };
  const registry = await preflight(setup, io);

  const closers: Closer[] = [{ what: 'the process registry', fn: async () => registry.release() }];
  const children = new Map<string, ManagedChild>();
  const groups = opts.groups ?? new Set<number>(); // every process group started, for a second Ctrl-C
  let closing = false;
  let reportFailure: (err: Error) => void = () => {};
  const failed = new Promise<Error>((resolve) => (reportFailure = resolve));
  try {
    mkdirSync(config.logDir, { recursive: true });
    mkdirSync(path.dirname(config.generatedLayoutFile), { recursive: true });
    writeFileSync(config.generatedLayoutFile, `${JSON.stringify(layout, null, 2)}\n`);
    const appLog = createWriteStream(path.join(config.logDir, 'haru.log'), { flags: 'a' });
    closers.push({ what: 'the log', fn: () => new Promise<void>((r) => appLog.end(() => r())) });
    const writeLog = (line: string) => void (appLog.writableEnded || appLog.write(line));
    io.out(`haru dev: state in ${show(config.stateDir)}, logs in ${show(config.logDir)}`);

    // Temporal first: everything after it needs the server.
    let temporalUiUrl = e.HARU_TEMPORAL_UI_URL ?? null;
    if (config.startsTemporal) {
      const temporalLog = createWriteStream(path.join(config.logDir, 'temporal.log'), { flags: 'a' });
      closers.push({ what: 'the Temporal log', fn: () => new Promise<void>((r) => temporalLog.end(() => r())) });
      const server = await startTemporalDevServer({
        port: e.HARU_TEMPORAL_PORT,
        uiPort: e.HARU_TEMPORAL_UI_PORT,
        dbFilename: path.join(config.stateDir, 'temporal.db'),
        detached: true,
        logStream: temporalLog,
        namespaces: config.temporal.namespace === 'default' ? [] : [config.temporal.namespace],
        startTimeoutMs: 120_000,
        cli: e.TEMPORAL_CLI,
      });
      groups.add(server.process.pid!);
      registry.add('temporal dev server', server.process.pid!, 'start-dev');
      closers.push({ what: 'the Temporal dev server', fn: () => server.stop() });
      server.process.once('exit', (code, signal) => {
        if (closing) return;
        const log = show(path.join(config.logDir, 'temporal.log'));
        reportFailure(new Error(`the Temporal dev server exited (${signal ?? `code ${code}`}); see ${log}`));
      });
      temporalUiUrl = server.uiUrl;
      io.out(`  temporal dev server  ${server.address}, Web UI ${server.uiUrl}`);
    } else {
      io.out(`  temporal             ${config.temporal.address} (TEMPORAL_ADDRESS or TEMPORAL_PROFILE)`);
    }
    checkAbort();

    const { database, store, applied, label } = await openStore(setup, cwd, closers);
    const fleetId = applied.fleetId;
    io.out(
      `  state store          ${label}; fleet ${applied.fleetSlug}: ${applied.created.length} created, ${applied.updated.length} updated`,
    );
    checkAbort();

    // Domains before the worker: the monitor's first poll then finds them up.
    const startedMarkers = new Map<string, string | null>();
    closers.push({
      what: 'the simulated domains',
      fn: async () => {
        await Promise.all([...children.values()].map((c) => c.stop(20_000)));
        // Whatever outlived its `haru sim domain` (a stop that timed out) carries the domain's marker. A domain
        // revived by hand from the same state directory has a marker of its own: it is not ours to stop.
        for (const [slug, marker] of startedMarkers) {
          await killSimDomain(simStateDir(config.stateDir, slug), { onlyMarker: marker });
        }
      },
    });
    const domainsStartedAt = new Date();
    const eventCursor = await latestEventId((after, limit) => store.events.list(fleetId, { after, limit }));
    const stored = await store.fleets.snapshot(fleetId);
    const activeAtStart = slugOfActive(stored) ?? layout.fleet.activeDomain;
    try {
      await startSimDomains(
        {
          spawn,
          projectRoot: PROJECT_ROOT,
          layoutFile: config.generatedLayoutFile,
          stateDir: config.stateDir,
          env,
          logDir: config.logDir,
        },
        layout.domains,
        activeAtStart,
        {
          onSpawn: (slug, pid) => {
            groups.add(pid);
            registry.add(`simulated domain ${slug}`, pid, 'sim');
          },
          onExit: (slug, child, exit) => {
            registry.remove(child.pid);
            if (!closing) io.out(`simulated domain ${slug} is gone (${exit.signal ?? `exit code ${exit.code}`})`);
          },
        },
        children,
      );
    } finally {
      // Each domain's run as this stack started it, so stopping touches nothing started there since.
      for (const d of layout.domains) startedMarkers.set(d.slug, simDomainMarker(simStateDir(config.stateDir, d.slug)));
    }
    io.out(`  simulated domains    ${layout.domains.map((d) => `${d.slug} (${d.supervisorUrl})`).join(', ')}`);
    checkAbort();

    const worker = await startDevWorker({
      config: setup.worker,
      store,
      fleetId,
      fleetSlug: layout.fleet.slug,
      cwd,
      writeLog,
      warn: io.err,
      closers,
      env,
    });
    worker.done.then(
      () => void (closing || reportFailure(new Error('the worker stopped'))),
      (err: Error) => reportFailure(new Error(`the worker failed: ${err.message}`)),
    );
    io.out(
      `  worker               task queues ${e.HARU_TASK_QUEUE} and ${monitorTaskQueue(e.HARU_TASK_QUEUE)}, monitor haru/${fleetId}/monitor`,
    );
    const metrics = { metricsUrl: worker.metricsUrl, sdkMetricsUrl: worker.sdkMetricsUrl };
    checkAbort();

    // The fleet page links workflows to the Web UI the banner names.
    const apiConfig = {
      ...setup.api,
      HARU_TEMPORAL_UI_URL: temporalUiUrl ?? undefined,
    };
    const { url: apiUrl } = await startDevApi({ config: apiConfig, store, database, writeLog, closers });
    io.out(`  api                  ${apiUrl} (default fleet ${setup.api.HARU_DEFAULT_FLEET})`);
    checkAbort();

    // From here on the terminal narrates the fleet: what the monitor does at start, then every failover.
    const tail = startEventTail(
      { list: (after) => store.events.list(fleetId, { after, limit: 100 }), write: (l) => io.out(l) },
      eventCursor,
    );
    closers.push({ what: 'the event tail', fn: () => tail.stop() });
    const client = createApiClient({ HARU_URL: apiUrl, HARU_API_TOKEN: setup.api.HARU_API_TOKEN });
    const { snapshot, settled } = await waitForFleetSettled(client, layout.fleet.slug, domainsStartedAt, 120_000);
    if (!settled)
      io.err(`haru dev: fleet ${snapshot.slug} has not settled (an operation in flight, or a failed active)`);
    for (const d of snapshot.domains)
      if (d.state !== 'ready')
        io.err(`haru dev: domain ${d.slug} is ${d.state}${d.lastError ? `: ${d.lastError}` : ''}`);

    const banner = bannerFor(setup, snapshot, { apiUrl, temporalUiUrl, cwd, ...metrics });
    io.out(banner);

    let stopping: Promise<void> | undefined;
    return {
      apiUrl,
      fleetId,
      banner,
      failed,
      close() {
        closing = true;
        stopping ??= runClosers(closers, io.err);
        return stopping;
      },
      kill() {
        for (const pgid of groups) signalGroup(pgid, 'SIGKILL');
      },
    };
  } catch (err) {
    closing = true;
    await runClosers(closers, io.err);
    throw err;
  }
}

const slugOfActive = (fleet: FleetSnapshot | null) => fleet?.domains.find((d) => d.id === fleet.activeDomainId)?.slug;

/** The banner for the settled fleet: URLs and commands a user copies from where they ran `haru dev`. */
function bannerFor(
  setup: DevSetup,
  snapshot: FleetSnapshot,
  at: Pick<BannerInfo, 'apiUrl' | 'temporalUiUrl' | 'metricsUrl' | 'sdkMetricsUrl'> & {
    cwd: string;
  },
): string {
  const { config, layout } = setup;
  const show = (p: string) => displayPath(at.cwd, p);
  const active = slugOfActive(snapshot) ?? layout.fleet.activeDomain;
  const activeLayout = layout.domains.find((d) => d.slug === active) ?? layout.domains[0]!;
  const model = activeLayout.slots.flatMap((s) => (s.kind === 'inference' ? s.models.map((m) => m.name) : []))[0];
  const temporal = findTemporalCli(config.env.TEMPORAL_CLI);
  const haru = `node ${show(path.join(PROJECT_ROOT, 'bin', 'haru.js'))}`;
  // Named outright: `haru sim kill --domain X` would look in .haru/sim/X of wherever it runs.
  const simDir = show(simStateDir(config.stateDir, active));
  return renderBanner({
    apiUrl: at.apiUrl,
    temporalUiUrl: at.temporalUiUrl,
    metricsUrl: at.metricsUrl,
    sdkMetricsUrl: at.sdkMetricsUrl,
    temporalAddress: config.temporal.address,
    namespace: config.temporal.namespace,
    fleetSlug: snapshot.slug,
    fleetId: snapshot.id,
    activeDomain: active,
    standbyDomains: snapshot.domains.filter((d) => d.id !== snapshot.activeDomainId).map((d) => d.slug),
    routeRevision: snapshot.routeRevision,
    model: model ?? 'model',
    haru,
    killCommand: `${haru} sim kill --state-dir ${simDir}`,
    reviveCommand: `${haru} sim domain --layout ${show(config.generatedLayoutFile)} --domain ${active} --state-dir ${simDir} --standby`,
    temporal: temporal ? show(temporal) : 'temporal',
    stateDir: show(config.stateDir),
    logFile: show(path.join(config.logDir, 'haru.log')),
    databaseLabel: config.env.DATABASE_URL ? 'Postgres at DATABASE_URL' : 'embedded Postgres',
    hasApiToken: !!setup.api.HARU_API_TOKEN,
    cliEnv: setup.api.PORT === 8700 ? '' : `HARU_URL=${at.apiUrl} `,
  });
}

/** `haru dev`: runs until SIGINT/SIGTERM, then stops everything it started (a second signal kills at once). */
export async function main(): Promise<void> {
  const io: DevIo = {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  };
  const abort = new AbortController();
  const groups = new Set<number>();
  let stack: RunningDevStack | undefined;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      io.err(`haru dev: ${signal} again, killing everything now`);
      for (const pgid of groups) signalGroup(pgid, 'SIGKILL');
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
    stack = await startDevStack(process.env, io, { abort: abort.signal, groups });
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
