import { type ChildProcess, spawn } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { findTemporalCli, TEMPORAL_MISSING_MESSAGE } from './temporal-cli';

/** Search attributes Haru registers so the Web UI can filter failovers by fleet, domain and operation kind. */
export const HARU_SEARCH_ATTRIBUTES = {
  HaruFleet: 'Keyword',
  HaruFleetSlug: 'Keyword',
  HaruDomain: 'Keyword',
  HaruDomainSlug: 'Keyword',
  HaruOperation: 'Keyword',
} as const;

export interface DevServerOptions {
  /** gRPC port (the UI listens on uiPort). */
  port: number;
  uiPort?: number;
  /** SQLite file; in-memory when absent. */
  dbFilename?: string;
  headless?: boolean;
  ip?: string;
  /** Give up waiting for the frontend after this long. */
  startTimeoutMs?: number;
  /** Where server output goes; ignored when absent. */
  logStream?: NodeJS.WritableStream;
  /**
   * Run the server in its own process group, so a Ctrl-C in the terminal reaches only the parent, which
   * then stops it in order (the dev stack: worker first, server last). Default false.
   */
  detached?: boolean;
  /** Extra namespaces to create at launch (`default` always exists). */
  namespaces?: string[];
  /** The `temporal` CLI to run (the dev stack's TEMPORAL_CLI); default: found as findTemporalCli finds it. */
  cli?: string;
}

export interface DevServer {
  address: string;
  uiUrl: string | null;
  process: ChildProcess;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the process is gone. */
  stop(): Promise<void>;
}

/**
 * Starts `temporal server start-dev` and resolves once its frontend answers a gRPC health check.
 * Throws with the CLI's output when it exits early or never becomes ready.
 */
export async function startTemporalDevServer(options: DevServerOptions): Promise<DevServer> {
  const cli = findTemporalCli(options.cli);
  if (!cli) throw new Error(TEMPORAL_MISSING_MESSAGE);
  const ip = options.ip ?? '127.0.0.1';
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(options.port), '--log-level', 'warn'];
  if (options.headless ?? !options.uiPort) args.push('--headless');
  else if (options.uiPort) args.push('--ui-port', String(options.uiPort));
  if (options.dbFilename) args.push('--db-filename', options.dbFilename);
  for (const [name, type] of Object.entries(HARU_SEARCH_ATTRIBUTES)) args.push('--search-attribute', `${name}=${type}`);
  for (const namespace of options.namespaces ?? []) args.push('--namespace', namespace);

  const detached = options.detached ?? false;
  const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'], detached });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8_000);
    options.logStream?.write(chunk);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const address = `${ip}:${options.port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  let ready = false;
  let early: number | null | undefined;
  void exited.then((code) => {
    early = code;
  });
  while (!ready && Date.now() < deadline && early === undefined) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.healthService.check({});
        await connection.workflowService.describeNamespace({ namespace: options.namespaces?.[0] ?? 'default' });
        ready = true;
      } finally {
        await connection.close();
      }
    } catch {
      await new Promise((r) => setTimeout(r, 150));
    }
  }
  const kill = (signal: NodeJS.Signals) => {
    try {
      if (detached && child.pid) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // already gone
    }
  };
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    kill('SIGTERM');
    const timer = setTimeout(() => kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  if (!ready) {
    await stop();
    throw new Error(`temporal dev server did not become ready on ${address} (exit ${early ?? 'none'}):\n${output}`);
  }
  return {
    address,
    uiUrl: options.uiPort && !options.headless ? `http://${ip}:${options.uiPort}` : null,
    process: child,
    stop,
  };
}
