import type { FleetLayout } from '../../schemas/layout';
import type { DevConfig } from './config';
import { type PlannedPort, simulatorPorts } from './layout';

/** One or more ports of the dev stack are taken; nothing was started. The message names each port and its variable. */
export class PortInUseError extends Error {
  constructor(readonly busy: PlannedPort[]) {
    super(
      busy
        .map(
          (p) =>
            `port ${p.port} is already in use (wanted for ${p.what}): stop what is using it, or set ${p.variable} to choose another`,
        )
        .join('\n'),
    );
    this.name = 'PortInUseError';
  }
}

/** Every port `haru dev` will listen on, given its config and the (already shifted) layout. */
export function planPorts(config: DevConfig, layout: FleetLayout): PlannedPort[] {
  const { env } = config;
  const plan: PlannedPort[] = [{ port: env.PORT, what: 'the Haru API', variable: 'PORT' }];
  if (config.startsTemporal) {
    plan.push(
      { port: env.HARU_TEMPORAL_PORT, what: 'the Temporal dev server (gRPC)', variable: 'HARU_TEMPORAL_PORT' },
      { port: env.HARU_TEMPORAL_UI_PORT, what: 'the Temporal Web UI', variable: 'HARU_TEMPORAL_UI_PORT' },
    );
  }
  if (env.HARU_WORKER_METRICS_PORT !== 0) {
    plan.push({
      port: env.HARU_WORKER_METRICS_PORT,
      what: 'the worker metrics endpoint',
      variable: 'HARU_WORKER_METRICS_PORT',
    });
  }
  if (env.HARU_WORKER_SDK_METRICS_PORT !== 0) {
    plan.push({
      port: env.HARU_WORKER_SDK_METRICS_PORT,
      what: 'the Temporal SDK metrics endpoint',
      variable: 'HARU_WORKER_SDK_METRICS_PORT',
    });
  }
  return [...plan, ...simulatorPorts(layout)];
}

/** Two parts of the plan that want one port: a configuration mistake, reported before anything starts. */
export function duplicatePorts(plan: PlannedPort[]): string[] {
  const seen = new Map<number, PlannedPort>();
  const problems: string[] = [];
  for (const p of plan) {
    const first = seen.get(p.port);
    if (first)
      problems.push(`port ${p.port} is wanted by both ${first.what} and ${p.what} (${first.variable}, ${p.variable})`);
    else seen.set(p.port, p);
  }
  return problems;
}

/**
 * Resolves when every planned port is free; otherwise throws PortInUseError naming each busy port.
 * `isFree` tries to listen on one port (injected: this module opens no socket).
 */
export async function assertPortsFree(plan: PlannedPort[], isFree: (port: number) => Promise<boolean>): Promise<void> {
  const results = await Promise.all(plan.map(async (p) => ({ p, free: await isFree(p.port) })));
  const busy = results.filter((r) => !r.free).map((r) => r.p);
  if (busy.length) throw new PortInUseError(busy);
}
