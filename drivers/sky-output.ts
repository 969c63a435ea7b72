import { z } from 'zod';

/**
 * Readers for what the `sky` CLI prints (checked against SkyPilot 0.14; the fixtures in
 * `test/fixtures/sky/` are printed by SkyPilot's own code, see `generate.py` there). `sky status` and
 * `sky serve status` print tables built by SkyPilot's `log_utils.create_table` (prettytable, no border,
 * left-aligned, two spaces of right padding): every value starts at the column of its header label, and a
 * value may contain single spaces (`2 hrs ago`, `1x(gpus=H100:8, ...)`). So rows are cut at the header's
 * label offsets, never split on whitespace. `sky status -o json` (a JSON array of cluster records) is read
 * too. Every reader returns null for a cluster or service the CLI reports as unknown, and a status it does
 * not know as `unknown` with the printed text, never as unreadable output.
 */

/** SkyPilot's cluster states: `ClusterStatus` in sky/utils/status_lib.py (INIT, UP, STOPPED, AUTOSTOPPING, PENDING). */
export const CLUSTER_STATUSES = ['INIT', 'UP', 'STOPPED', 'AUTOSTOPPING', 'PENDING'] as const;

/**
 * What the STATUS column can show: the states, plus `UNHEALTHY`, which `_get_status_colored` in
 * sky/utils/cli_utils/status_utils.py prints for an INIT cluster whose `init_kind` is `unhealthy` (display
 * only: the stored state stays INIT).
 */
export const CLUSTER_DISPLAY_STATUSES = [...CLUSTER_STATUSES, 'UNHEALTHY'] as const;

/** A printed cluster status, or `unknown` for one this reader does not know (the text is in `statusText`). */
export type ClusterStatus = (typeof CLUSTER_DISPLAY_STATUSES)[number] | 'unknown';

/** SkyServe service states: `ServiceStatus` in sky/serve/serve_state.py. */
export const SERVICE_STATUSES = [
  'CONTROLLER_INIT',
  'REPLICA_INIT',
  'CONTROLLER_FAILED',
  'READY',
  'SHUTTING_DOWN',
  'FAILED',
  'FAILED_CLEANUP',
  'NO_REPLICA',
] as const;

/** A printed service status, or `unknown` (the text is in `statusText`). */
export type ServiceStatus = (typeof SERVICE_STATUSES)[number] | 'unknown';

/** One cluster as `sky status` reports it. Text fields are as printed; null where the CLI printed `-` or nothing. */
export interface SkyCluster {
  name: string;
  status: ClusterStatus;
  /** The status exactly as printed (for `unknown`, the only record of what SkyPilot said). */
  statusText: string;
  infra: string | null;
  resources: string | null;
  autostop: string | null;
  launched: string | null;
}

export interface SkyReplica {
  id: number;
  /** As printed: a `ReplicaStatus` of sky/serve/serve_state.py, possibly followed by ` (detail)`. */
  status: string;
  endpoint: string | null;
  infra: string | null;
}

/** One service as `sky serve status NAME` reports it, with its replicas. */
export interface SkyService {
  name: string;
  status: ServiceStatus;
  /** The status exactly as printed. */
  statusText: string;
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

const clusterStatusOf = (text: string): ClusterStatus =>
  (CLUSTER_DISPLAY_STATUSES as readonly string[]).includes(text) ? (text as ClusterStatus) : 'unknown';
const serviceStatusOf = (text: string): ServiceStatus =>
  (SERVICE_STATUSES as readonly string[]).includes(text) ? (text as ServiceStatus) : 'unknown';

/**
 * Reads `sky status [--refresh] NAME` (table form). Returns the named cluster, or null when the CLI says
 * `Cluster 'NAME' not found.` / `No existing clusters.` or lists other clusters only. Throws
 * UnparseableOutputError when the output has neither a cluster table nor a not-found line.
 */
export function parseStatusTable(stdout: string, cluster: string): SkyCluster | null {
  const table = readTable(stdout, 'NAME', ['STATUS']);
  const row = table?.rows.find((r) => r.NAME === cluster);
  if (!row) {
    if (table || saysNotFound(stdout, cluster)) return null;
    throw new UnparseableOutputError(`no cluster table and no not-found line in sky status output`);
  }
  const statusText = row.STATUS ?? '';
  return {
    name: cluster,
    status: clusterStatusOf(statusText),
    statusText,
    infra: dash(row.INFRA ?? row.REGION),
    resources: dash(row.RESOURCES),
    autostop: dash(row.AUTOSTOP),
    launched: dash(row.LAUNCHED),
  };
}

// `sky status -o json`: sky/client/cli/command.py status() prints
// `json.dumps([r.model_dump(mode='json', exclude={'handle', 'credentials'}) for r in cluster_records])`,
// the StatusResponse model of sky/schemas/api/responses.py. Only the fields read here are named.
const statusJsonSchema = z.array(
  z.looseObject({
    name: z.string(),
    status: z.string(),
    init_kind: z.string().nullish(),
    autostop: z.number().nullish(),
    to_down: z.boolean().nullish(),
    launched_at: z.number().nullish(),
    cloud: z.string().nullish(),
    region: z.string().nullish(),
    resources_str: z.string().nullish(),
  }),
);

/**
 * Reads `sky status -o json NAME`: the JSON array of cluster records SkyPilot prints. Null when the named
 * cluster is not in it. The status is the table's: `UNHEALTHY` for an INIT record with `init_kind`
 * `unhealthy`; autostop as the table writes it (`10m`, `1h (down)`).
 */
export function parseStatusJson(stdout: string, cluster: string): SkyCluster | null {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    throw new UnparseableOutputError('sky status output is not JSON');
  }
  const parsed = statusJsonSchema.safeParse(json);
  if (!parsed.success) throw new UnparseableOutputError('sky status JSON is not an array of {name, status}');
  const record = parsed.data.find((c) => c.name === cluster);
  if (!record) return null;
  const statusText = record.status === 'INIT' && record.init_kind === 'unhealthy' ? 'UNHEALTHY' : record.status;
  return {
    name: cluster,
    status: clusterStatusOf(statusText),
    statusText,
    infra: [record.cloud, record.region].filter(Boolean).join('/') || null,
    resources: record.resources_str ?? null,
    autostop: autostopText(record.autostop ?? -1, record.to_down ?? false),
    launched: record.launched_at ? new Date(record.launched_at * 1000).toISOString() : null,
  };
}

/** The AUTOSTOP column: `_get_autostop` in sky/utils/cli_utils/status_utils.py. */
function autostopText(minutes: number, toDown: boolean): string | null {
  let text = '';
  if (minutes >= 0) text = minutes > 0 && minutes % 60 === 0 ? `${minutes / 60}h` : `${minutes}m`;
  if (toDown) text += `${text ? ' ' : ''}(down)`;
  return text || null;
}

/**
 * Reads `sky serve status NAME`: the Services table and the Service Replicas table after it. Null when
 * the CLI says `No existing services.`, `Service 'NAME' not found.` or `No live services.` (no serve
 * controller). Throws UnparseableOutputError for anything else without the service's row.
 */
export function parseServeStatus(stdout: string, service: string): SkyService | null {
  const services = readTable(stdout, 'NAME', ['STATUS', 'REPLICAS']);
  const row = services?.rows.find((r) => r.NAME === service);
  if (!row) {
    if (services || saysNotFound(stdout, service)) return null;
    throw new UnparseableOutputError('no service table and no not-found line in sky serve status output');
  }
  const statusText = row.STATUS ?? '';
  const counts = /^(\d+)\/(\d+)$/.exec(row.REPLICAS ?? '');
  const replicas = readTable(stdout, 'SERVICE_NAME', ['ID', 'STATUS']);
  return {
    name: service,
    status: serviceStatusOf(statusText),
    statusText,
    replicas: counts ? { ready: Number(counts[1]), total: Number(counts[2]) } : null,
    endpoint: dash(row.ENDPOINT),
    replicaList: (replicas?.rows ?? [])
      .filter((r) => r.SERVICE_NAME === service && /^\d+$/.test(r.ID ?? ''))
      .map((r) => ({ id: Number(r.ID), status: r.STATUS ?? '', endpoint: dash(r.ENDPOINT), infra: dash(r.INFRA) })),
  };
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * True when a `sky` command's output says there is nothing called `name`. The lines, all SkyPilot's own:
 * - `Cluster 'NAME' not found.` (`sky status NAME`: show_status_table, sky/utils/cli_utils/status_utils.py);
 * - `'NAME' cluster not found. Please specify ...` (`sky status --endpoint PORT NAME`: _show_endpoint and
 *   _STATUS_PROPERTY_CLUSTER_NUM_ERROR_MESSAGE, sky/client/cli/command.py);
 * - `Cluster(s) not found (tip: see \`sky status\`).` (`sky down` / `sky stop`, sky/client/cli/command.py);
 * - `No existing clusters.` / `No existing services.` (the empty tables);
 * - `Service 'NAME' not found.` (`sky serve status NAME`: _handle_services_request);
 * - `No service found. Please specify an existing service ...` (`sky serve status --endpoint NAME`);
 * - `No live services.` / `All services should have terminated.` (no serve controller, or a stopped one:
 *   sky/utils/controller_utils.py default_hint_if_non_existent, sky/serve/server/impl.py down);
 * - `No service to terminate.` (`sky serve down NAME`: terminate_services, sky/serve/serve_utils.py) —
 *   unless the same output says the service was skipped because it failed ({@link saysSkippedFailed}).
 * Deliberately narrow: a failure that merely mentions "not found" (missing credentials, a missing binary,
 * `Endpoint 8701 not found for cluster 'NAME'.`) must stay a failure, or a live cluster would be recorded
 * as gone.
 */
export function saysNotFound(output: string, name: string): boolean {
  const text = stripAnsi(output);
  const quoted = `'?${escapeRegExp(name)}'?`;
  if (saysSkippedFailed(text, name)) return false;
  return (
    /Cluster\(s\) not found/.test(text) ||
    /No existing (clusters|services)\./.test(text) ||
    /No live services\./.test(text) ||
    /All services should have terminated\./.test(text) ||
    /No service to terminate\./.test(text) ||
    /No service found\. Please specify an existing service/.test(text) ||
    new RegExp(`(Cluster|Service)s? ${quoted} (is )?not found`).test(text) ||
    new RegExp(`(^|\\s)'${escapeRegExp(name)}' cluster not found\\.`).test(text)
  );
}

/**
 * True when `sky serve down NAME` left the service up because it is in a failed state (CONTROLLER_FAILED,
 * FAILED_CLEANUP): terminate_services in sky/serve/serve_utils.py prints `Service 'NAME' is in failed
 * status (...). Skipping its termination as it could lead to a resource leak. (Use \`sky serve down NAME
 * --purge\` ...)` and exits 0. Only `--purge` takes such a service down.
 */
export function saysSkippedFailed(output: string, name: string): boolean {
  return new RegExp(`Service '${escapeRegExp(name)}' is in failed status .*Skipping its termination`).test(
    stripAnsi(output),
  );
}

/**
 * The endpoint `sky status --endpoint PORT NAME` or `sky serve status --endpoint NAME` prints, as a URL:
 * `host:port` (a cloud VM's opened port, SkyServe's load balancer) becomes `<scheme>://host:port` (default http: what
 * the process behind the port speaks is the caller's to say); an
 * `http(s)://…` line (a Kubernetes ingress) is taken as it is. The endpoint is the last non-empty line
 * (a hint or a spinner line may come before it). Throws UnparseableOutputError for anything else.
 */
export function parseEndpoint(stdout: string, scheme: 'http' | 'https' = 'http'): string {
  const line =
    stripAnsi(stdout)
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? '';
  const candidate = /^https?:\/\//.test(line) ? line : `${scheme}://${line}`;
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
