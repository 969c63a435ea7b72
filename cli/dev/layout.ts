import path from 'node:path';
import { ConfigError } from '../../schemas/env';
import type { FleetLayout } from '../../schemas/layout';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost']);

/** One TCP port the dev stack will listen on, with what it is for and the variable that moves it. */
export interface PlannedPort {
  port: number;
  what: string;
  /** The variable to set to move this port. */
  variable: string;
}

export interface DevLayoutOptions {
  /** Added to every supervisor and model port. */
  portOffset: number;
  /** Relative checkpoint directories are placed here (a leading `.haru/` stands for this directory). */
  stateDir: string;
}

function shiftUrl(raw: string, offset: number, where: string): string {
  const url = new URL(raw);
  if (url.protocol !== 'http:' || !LOOPBACK_HOSTS.has(url.hostname)) {
    throw new ConfigError(
      `${where} is ${raw}: haru dev simulates every domain on this machine, so it must be http://127.0.0.1:PORT`,
    );
  }
  const port = Number(url.port || 80) + offset;
  if (port < 1 || port > 65_535) {
    throw new ConfigError(`${where}: port ${url.port || 80} + HARU_SIM_PORT_OFFSET ${offset} is outside 1-65535`);
  }
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString().replace(/\/$/, '');
}

function checkpointDirIn(stateDir: string, dir: string): string {
  if (path.isAbsolute(dir)) return dir;
  const parts = path.normalize(dir).split(path.sep);
  return path.join(stateDir, ...(parts[0] === '.haru' ? parts.slice(1) : parts));
}

/**
 * The layout `haru dev` runs: every supervisor and model port shifted by `portOffset`, hosts normalised to
 * 127.0.0.1, relative checkpoint directories moved under the state directory. Pure. Throws ConfigError
 * when a domain is not on loopback (it could not be simulated here) or a shifted port leaves 1-65535.
 */
export function buildDevLayout(layout: FleetLayout, opts: DevLayoutOptions): FleetLayout {
  return {
    ...layout,
    domains: layout.domains.map((domain) => ({
      ...domain,
      supervisorUrl: shiftUrl(domain.supervisorUrl, opts.portOffset, `domain ${domain.slug}: supervisorUrl`),
      ...(domain.servingBaseUrl
        ? {
            servingBaseUrl: shiftUrl(domain.servingBaseUrl, opts.portOffset, `domain ${domain.slug}: servingBaseUrl`),
          }
        : {}),
      slots: domain.slots.map((slot) =>
        slot.kind === 'inference'
          ? {
              ...slot,
              models: slot.models.map((m) => ({
                ...m,
                servingUrl: shiftUrl(m.servingUrl, opts.portOffset, `domain ${domain.slug}: model ${m.name}`),
              })),
            }
          : { ...slot, checkpointDir: checkpointDirIn(opts.stateDir, slot.checkpointDir) },
      ),
    })),
  };
}

/** Every port the simulated domains of `layout` listen on. */
export function simulatorPorts(layout: FleetLayout): PlannedPort[] {
  const variable = 'HARU_SIM_PORT_OFFSET';
  const portOf = (url: string) => Number(new URL(url).port || 80);
  return layout.domains.flatMap((domain) => [
    { port: portOf(domain.supervisorUrl), what: `the supervisor of simulated domain ${domain.slug}`, variable },
    ...domain.slots.flatMap((slot) =>
      slot.kind === 'inference'
        ? slot.models.map((m) => ({
            port: portOf(m.servingUrl),
            what: `simulated vLLM ${m.name} of domain ${domain.slug}`,
            variable,
          }))
        : [],
    ),
  ]);
}
