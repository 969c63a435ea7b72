/** What the banner shows; everything is already resolved, so rendering is pure. */
export interface BannerInfo {
  apiUrl: string;
  /** null when TEMPORAL_ADDRESS points at a server whose UI we do not know. */
  temporalUiUrl: string | null;
  temporalAddress: string;
  /** The worker's Prometheus endpoint. */
  metricsUrl: string;
  /** The Temporal SDK runtime's; null when HARU_WORKER_SDK_METRICS_PORT is 0. */
  sdkMetricsUrl: string | null;
  namespace: string;
  fleetSlug: string;
  fleetId: string;
  activeDomain: string;
  standbyDomains: string[];
  routeRevision: number;
  /** A model the active domain serves, for the chat example. */
  model: string;
  /** How to run `haru` from the user's shell (`node bin/haru.js`). */
  haru: string;
  /** The command that SIGKILLs the active domain (`haru sim kill ...`). */
  killCommand: string;
  /** The command that brings the killed domain back as a standby (`haru sim domain ... --standby`). */
  reviveCommand: string;
  /** How to run the temporal CLI (`temporal`, or `.haru/tools/bin/temporal`). */
  temporal: string;
  /** The state directory as the user would type it. */
  stateDir: string;
  logFile: string;
  databaseLabel: string;
  /** The API wants `Authorization: Bearer $HARU_API_TOKEN`. */
  hasApiToken: boolean;
  /** Extra environment the CLI commands need (`HARU_URL=...` when the API is not on its default port). */
  cliEnv: string;
}

const shellQuote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * The text `haru dev` prints once the whole stack is ready: where everything is, and commands to copy:
 * a chat request, killing the active domain, watching the failover, the temporal CLI, and reviving a
 * killed domain. Every command here is run by the end-to-end test or by the quick start.
 */
export function renderBanner(b: BannerInfo): string {
  const auth = b.hasApiToken ? ` -H "authorization: Bearer $HARU_API_TOKEN"` : '';
  const body = JSON.stringify({ model: b.model, messages: [{ role: 'user', content: 'Hello from Haru!' }] });
  const haru = `${b.cliEnv}${b.haru}`;
  const t = `${b.temporal} --address ${b.temporalAddress} --namespace ${b.namespace}`;
  const lines = [
    '',
    'Haru dev stack is ready.',
    '',
    `  API (OpenAI-compatible)  ${b.apiUrl}/v1`,
    `  Temporal Web UI          ${b.temporalUiUrl ?? `(your server at ${b.temporalAddress})`}`,
    `  Fleet                    ${b.fleetSlug}: active ${b.activeDomain}, standby ${b.standbyDomains.join(', ') || 'none'}, route revision ${b.routeRevision}`,
    `  Metrics                  worker ${b.metricsUrl}, Temporal SDK ${b.sdkMetricsUrl ?? 'off (HARU_WORKER_SDK_METRICS_PORT=0)'}`,
    `  State                    ${b.stateDir} (${b.databaseLabel})`,
    `  Logs                     ${b.logFile}`,
    '',
    'Try it from another terminal:',
    '',
    '  # 1. chat with the active domain',
    `  curl -s ${b.apiUrl}/v1/chat/completions -H 'content-type: application/json'${auth} \\`,
    `    -d ${shellQuote(body)}`,
    '',
    '  # 2. in a second terminal: wait for the next failover and follow it step by step',
    `  ${haru} fleet watch ${b.fleetSlug} --next`,
    '',
    '  # 3. kill the active domain (SIGKILL to its supervisor, vLLMs and trainers: a dead host)',
    `  ${b.killCommand}`,
    '',
    '  # the fleet, its audit log, and the same chat request again (now served by the new active)',
    `  ${haru} fleet status ${b.fleetSlug}`,
    `  ${haru} fleet events ${b.fleetSlug}`,
    '',
    '  # bring the killed domain back as a standby (runs in that terminal; Ctrl-C there stops it)',
    `  ${b.reviveCommand}`,
    '',
    '  # Temporal: the fleet’s workflows, its monitor’s health, pausing auto-failover',
    `  ${t} workflow list --query "HaruFleetSlug='${b.fleetSlug}'"`,
    `  ${t} workflow query --workflow-id haru/${b.fleetId}/monitor --type health`,
    `  ${t} workflow signal --workflow-id haru/${b.fleetId}/monitor --name pauseAutoFailover`,
    `  ${t} workflow signal --workflow-id haru/${b.fleetId}/monitor --name resumeAutoFailover`,
    '',
    'Ctrl-C stops everything this command started.',
    '',
  ];
  return lines.join('\n');
}
