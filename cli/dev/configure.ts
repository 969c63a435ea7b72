import { readFileSync } from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { type ApiConfig, loadApiConfig } from '../../api/config';
import { validateLayout } from '../../db/layout-apply';
import { domainToken } from '../../clients/supervisor-access';
import { ConfigError } from '../../schemas/env';
import { formatProblems } from '../../schemas/issues';
import type { FleetLayout } from '../../schemas/layout';
import { loadWorkerConfig, type WorkerConfig } from '../../workers/config';
import { type DevConfig, loadDevConfig } from './config';
import { buildDevLayout } from './layout';

/** Everything `haru dev` needs to know before it starts anything. */
export interface DevSetup {
  config: DevConfig;
  /** The layout it runs: ports shifted, checkpoint directories under the state directory. */
  layout: FleetLayout;
  api: ApiConfig;
  worker: WorkerConfig;
}

/** Reads and validates a layout file (JSON, or YAML by extension); ConfigError lists every problem. */
export function readLayout(file: string): FleetLayout {
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

/**
 * Parses the dev stack's environment, the layout, and the in-process API's and worker's own configs, all
 * before anything starts, so a bad variable changes nothing (ConfigError naming every problem). The API
 * always binds 127.0.0.1 here and serves the layout's fleet by default.
 */
export function configureDevStack(env: NodeJS.ProcessEnv, cwd: string, projectRoot: string): DevSetup {
  const config = loadDevConfig(env, cwd, projectRoot);
  const e = config.env;
  const shared = {
    HARU_TASK_QUEUE: e.HARU_TASK_QUEUE,
    DATABASE_URL: e.DATABASE_URL ?? '',
    HARU_STATE_DIR: config.stateDir,
    LOG_LEVEL: e.LOG_LEVEL,
  };
  const layout = buildDevLayout(readLayout(config.layoutFile), {
    portOffset: e.HARU_SIM_PORT_OFFSET,
    stateDir: config.stateDir,
  });
  const api = loadApiConfig({
    ...env,
    ...shared,
    PORT: String(e.PORT),
    HOST: '127.0.0.1',
    HARU_API_TOKEN: e.HARU_API_TOKEN ?? '',
    HARU_DEFAULT_FLEET: e.HARU_DEFAULT_FLEET ?? layout.fleet.slug,
  });
  // Both parts connect where the stack decided (its own dev server, or the configured one).
  api.temporal = config.temporal;
  const worker = loadWorkerConfig({
    ...env,
    ...shared,
    HARU_WORKER_METRICS_PORT: String(e.HARU_WORKER_METRICS_PORT),
    HARU_WORKER_SDK_METRICS_PORT: String(e.HARU_WORKER_SDK_METRICS_PORT),
    HARU_WORKER_METRICS_HOST: '127.0.0.1',
    HARU_SUPERVISOR_TOKEN: e.HARU_SUPERVISOR_TOKEN ?? '',
  });
  worker.temporal = config.temporal;
  // Each simulated supervisor requires its domain's token: one that cannot be read stops the stack here.
  for (const domain of layout.domains) {
    // An issued token is derived from the domain's id at its launch: its source is checked then.
    if (domain.supervisor?.issueToken) continue;
    domainToken(domain, env, worker.HARU_SUPERVISOR_TOKEN, { fail: (message) => new ConfigError(message) });
  }
  return { config, layout, api, worker };
}

/** How a path is shown to the user: relative to where they run commands when it is inside it. */
export function displayPath(cwd: string, p: string): string {
  const rel = path.relative(cwd, p);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : p;
}
