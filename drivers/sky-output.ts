import { z } from 'zod';

/**
 * Readers for what the `sky` CLI prints. `sky status` and `sky serve status` print tables built by
 * SkyPilot's `log_utils.create_table` (prettytable, no border, left-aligned, two spaces of right
 * padding): every value starts at the column of its header label, and a value may contain single
 * spaces (`2 hrs ago`, `1x(gpus=H100:8, ...)`). So rows are cut at the header's label offsets, never
 * split on whitespace. `sky status -o json` (SkyPilot's planned machine-readable form) is read too.
 * Every reader returns null for a cluster or service the CLI reports as unknown.
 */

/** SkyPilot cluster states (`sky status --help`). */
export const CLUSTER_STATUSES = ['INIT', 'UP', 'STOPPED'] as const;
export type ClusterStatus = (typeof CLUSTER_STATUSES)[number];

/** SkyServe service states (`sky serve status --help`). */
export const SERVICE_STATUSES = [
  'CONTROLLER_INIT',
  'REPLICA_INIT',
  'CONTROLLER_FAILED',
  'READY',
  'SHUTTING_DOWN',
  'FAILED',
  'FAILED_CLEANUP',
  'NO_REPLICAS',
] as const;
export type ServiceStatus = (typeof SERVICE_STATUSES)[number];

/** One cluster as `sky status` reports it. Text fields are as printed; null where the CLI printed `-` or nothing. */
export interface SkyCluster {
  name: string;
  status: ClusterStatus;
  infra: string | null;
  resources: string | null;
  autostop: string | null;
  launched: string | null;
}

export interface SkyReplica {
  id: number;
  status: string;
  endpoint: string | null;
  infra: string | null;
}

/** One service as `sky serve status NAME` reports it, with its replicas. */
export interface SkyService {
  name: string;
  status: ServiceStatus;
  /** `ready/total` from the REPLICAS column; null when it could not be read. */
  replicas: { ready: number; total: number } | null;
  endpoint: string | null;
  replicaList: SkyReplica[];
}

/** Output that does not look like what the CLI prints; the driver turns it into a SkyCommandError. */
export class UnparseableOutputError extends Error {
  override readonly name = 'UnparseableOutputError';
}

// Colour codes: click strips them when stdout is not a terminal, but a forced colour setting keeps them.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;
export const stripAnsi = (text: string): string => text.replace(ANSI, '');

const dash = (value: string | undefined): string | null => (!value || value === '-' ? null : value);

interface Table {
  columns: string[];
  rows: Record<string, string>[];
}

/**
 * Finds the table whose header line starts with `firstColumn` and has every label in `required`, and cuts
 * its rows (up to the first blank line) at the header's label offsets. Null when no such header exists.
 */
export function readTable(text: string, firstColumn: string, required: readonly string[]): Table | null {
  const lines = stripAnsi(text).replace(/\r/g, '').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const header = lines[i]!;
    // Labels are separated by at least two spaces; a label itself may hold one (`COST (est.)`).
    const labels = [...header.matchAll(/\S+(?: \S+)*/g)].map((m) => ({ name: m[0], at: m.index }));
    if (labels[0]?.name !== firstColumn || labels[0].at !== 0) continue;
    const columns = labels.map((l) => l.name);
    if (!required.every((r) => columns.includes(r))) continue;
    const rows: Record<string, string>[] = [];
    for (let j = i + 1; j < lines.length; j++) {
      const line = lines[j]!;
      if (line.trim() === '') break;
      const row: Record<string, string> = {};
      labels.forEach((label, k) => {
        const end = k + 1 < labels.length ? labels[k + 1]!.at : undefined;
        row[label.name] = line.slice(label.at, end).trim();
      });
      rows.push(row);
    }
    return { columns, rows };
  }
  return null;
}

const isClusterStatus = (s: string): s is ClusterStatus => (CLUSTER_STATUSES as readonly string[]).includes(s);
const isServiceStatus = (s: string): s is ServiceStatus => (SERVICE_STATUSES as readonly string[]).includes(s);

/**
 * Reads `sky status [--refresh] NAME` (table form). Returns the named cluster, or null when the CLI says
 * `Cluster 'NAME' not found.` / `No existing clusters.` or lists other clusters only. Throws
 * UnparseableOutputError when the output has neither a cluster table nor a not-found line, or a status
 * outside INIT/UP/STOPPED.
 */
export function parseStatusTable(stdout: string, cluster: string): SkyCluster | null {
  const table = readTable(stdout, 'NAME', ['STATUS']);
  const row = table?.rows.find((r) => r.NAME === cluster);
  if (!row) {
    if (table || saysNotFound(stdout, cluster)) return null;
    throw new UnparseableOutputError(`no cluster table and no not-found line in sky status output`);
  }
  const status = row.STATUS ?? '';
  if (!isClusterStatus(status)) throw new UnparseableOutputError(`cluster ${cluster} has unknown status "${status}"`);
  return {
    name: cluster,
    status,
    infra: dash(row.INFRA ?? row.REGION),
    resources: dash(row.RESOURCES),
    autostop: dash(row.AUTOSTOP),
    launched: dash(row.LAUNCHED),
  };
}

const statusJsonSchema = z.object({
  clusters: z.array(
    z.looseObject({
      name: z.string(),
      status: z.string(),
      cloud: z.string().nullish(),
      region: z.string().nullish(),
      resources: z.string().nullish(),
      autostop_minutes: z.number().nullish(),
      to_down: z.boolean().nullish(),
      launched_at: z.string().nullish(),
    }),
  ),
});

/**
 * Reads `sky status -o json NAME` (the shape of SkyPilot's CLI JSON plan: `{"clusters": [...]}`).
 * Null when the named cluster is not in the list.
 */
export function parseStatusJson(stdout: string, cluster: string): SkyCluster | null {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    throw new UnparseableOutputError('sky status output is not JSON');
  }
  const parsed = statusJsonSchema.safeParse(json);
  if (!parsed.success) throw new UnparseableOutputError('sky status JSON has no "clusters" list of {name, status}');
  const record = parsed.data.clusters.find((c) => c.name === cluster);
  if (!record) return null;
  if (!isClusterStatus(record.status)) {
    throw new UnparseableOutputError(`cluster ${cluster} has unknown status "${record.status}"`);
  }
  const autostop =
    record.autostop_minutes === null || record.autostop_minutes === undefined || record.autostop_minutes < 0
      ? null
      : `${record.autostop_minutes}m${record.to_down ? ' (down)' : ''}`;
  return {
    name: cluster,
    status: record.status,
    infra: [record.cloud, record.region].filter(Boolean).join('/') || null,
    resources: record.resources ?? null,
    autostop,
    launched: record.launched_at ?? null,
  };
}

/**
 * Reads `sky serve status NAME`: the Services table and the Service Replicas table after it. Null when
 * the CLI says `No existing services.` / `Service 'NAME' not found.`. Throws UnparseableOutputError for
 * anything else without the service's row, or an unknown service status.
 */
export function parseServeStatus(stdout: string, service: string): SkyService | null {
  const services = readTable(stdout, 'NAME', ['STATUS', 'REPLICAS']);
  const row = services?.rows.find((r) => r.NAME === service);
  if (!row) {
    if (services || saysNotFound(stdout, service)) return null;
    throw new UnparseableOutputError('no service table and no not-found line in sky serve status output');
  }
  const status = row.STATUS ?? '';
  if (!isServiceStatus(status)) throw new UnparseableOutputError(`service ${service} has unknown status "${status}"`);
  const counts = /^(\d+)\/(\d+)$/.exec(row.REPLICAS ?? '');
  const replicas = readTable(stdout, 'SERVICE_NAME', ['ID', 'STATUS']);
  return {
    name: service,
    status,
    replicas: counts ? { ready: Number(counts[1]), total: Number(counts[2]) } : null,
    endpoint: dash(row.ENDPOINT),
    replicaList: (replicas?.rows ?? [])
      .filter((r) => r.SERVICE_NAME === service && /^\d+$/.test(r.ID ?? ''))
      .map((r) => ({ id: Number(r.ID), status: r.STATUS ?? '', endpoint: dash(r.ENDPOINT), infra: dash(r.INFRA) })),
  };
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * True when `sky down` / `sky stop` / `sky serve down` output says there is nothing called `name`:
 * `Cluster(s) not found (tip: see \`sky status\`).`, `Cluster NAME not found.`, `Service 'NAME' not found.`,
 * `No existing services.`. Deliberately narrow: a failure that merely mentions "not found" (missing
 * credentials, a missing binary) must stay a failure, or a live cluster would be recorded as gone.
 */
export function saysNotFound(output: string, name: string): boolean {
  const text = stripAnsi(output);
  const quoted = `'?${escapeRegExp(name)}'?`;
  return (
    /Cluster\(s\) not found/.test(text) ||
    /No existing (clusters|services)\./.test(text) ||
    new RegExp(`(Cluster|Service)s? ${quoted} (is )?not found`).test(text) ||
    new RegExp(`(Cluster|Service) ${quoted} does not exist`).test(text)
  );
}

/**
 * The endpoint `sky status --endpoint PORT NAME` or `sky serve status --endpoint NAME` prints, as a URL:
 * `host:port` (a cloud VM's opened port, SkyServe's load balancer) becomes `http://host:port`; an
 * `http(s)://…` line (a Kubernetes ingress) is taken as it is. The endpoint is the last non-empty line
 * (a hint or a spinner line may come before it). Throws UnparseableOutputError for anything else.
 */
export function parseEndpoint(stdout: string): string {
  const line =
    stripAnsi(stdout)
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? '';
  const candidate = /^https?:\/\//.test(line) ? line : `http://${line}`;
  let url: URL;
  try {
    url = new URL(candidate);
  } catch {
    throw new UnparseableOutputError(`no endpoint in sky output: "${line.slice(0, 200)}"`);
  }
  if (!url.hostname || /\s/.test(line) || (!url.port && !/^https?:\/\//.test(line))) {
    throw new UnparseableOutputError(`no endpoint in sky output: "${line.slice(0, 200)}"`);
  }
  return candidate;
}
