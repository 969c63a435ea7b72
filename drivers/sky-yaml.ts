import { Document, Scalar, type YAMLMap } from 'yaml';
import type { Domain } from '../schemas/entities';
import { ONE_REPLICA_REASON, type Placement } from '../schemas/layout';

/** What a task or service YAML is rendered from: the domain row (with its launch spec) and its fleet's slug. */
export interface RenderInput {
  domain: Pick<Domain, 'id' | 'slug' | 'provider' | 'placement' | 'supervisorUrl' | 'launch'>;
  fleetSlug: string;
}

/** Thrown for a domain that cannot be rendered (static provider, no launch spec). */
export class RenderError extends Error {
  override readonly name = 'RenderError';
}

/** Default time a SkyServe replica gets to pass its first readiness probe: model download and load. */
export const DEFAULT_INITIAL_DELAY_SECONDS = 1_200;

/**
 * The SkyPilot cluster (or SkyServe service) name of a domain: `haru-<fleet>-<domain>`. Both parts are
 * slugs, so the name fits SkyPilot's `[a-zA-Z]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?`.
 */
export const skyNameFor = (fleetSlug: string, domainSlug: string): string => `haru-${fleetSlug}-${domainSlug}`;

/** The port of an http(s) URL, with the scheme's default when none is written. */
export function urlPort(url: string): number {
  const parsed = new URL(url);
  if (parsed.port) return Number(parsed.port);
  return parsed.protocol === 'https:' ? 443 : 80;
}

/**
 * `resources.infra` from a placement: `cloud`, `cloud/region`, `cloud/region/zone`, with `*` for a part
 * left open (`*\/us-east-1`: that region on any cloud that has it; `aws/*\/us-east-1a`), the syntax of
 * `InfraInfo.from_str` in sky/utils/infra_utils.py (SkyPilot >= 0.9; it replaced `cloud`/`region`/`zone`).
 * Undefined when nothing is pinned (SkyPilot picks the cheapest enabled cloud).
 */
export function infraOf(placement: Placement): string | undefined {
  const { cloud, region, zone } = placement;
  if (!cloud && !region && !zone) return undefined;
  if (zone) return `${cloud ?? '*'}/${region ?? '*'}/${zone}`;
  if (region) return `${cloud ?? '*'}/${region}`;
  return cloud;
}

// Insertion order is the rendered order: yaml keeps it, so snapshots are stable.
function resourcesOf(input: RenderInput, ports: number[]): Record<string, unknown> {
  const { placement } = input.domain;
  const resources: Record<string, unknown> = {};
  const infra = infraOf(placement);
  if (infra) resources.infra = infra;
  if (placement.accelerators) resources.accelerators = placement.accelerators;
  if (placement.useSpot !== undefined) resources.use_spot = placement.useSpot;
  // sky/utils/schemas.py resources `image_id`: a string (a cloud image, or `docker:<image>`).
  const imageId = input.domain.launch?.imageId;
  if (imageId) resources.image_id = imageId;
  resources.ports = ports;
  return resources;
}

/** `workdir`, `setup` and `run`: what is shipped to the host and what runs there (sky/task.py). */
function commandsOf(launch: NonNullable<RenderInput['domain']['launch']>): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  if (launch.workdir) doc.workdir = launch.workdir;
  if (launch.setup) doc.setup = launch.setup;
  doc.run = launch.run;
  return doc;
}

/** Launch spec of a renderable domain; throws RenderError otherwise. */
function launchOf(input: RenderInput) {
  const { domain } = input;
  if (domain.provider === 'static') {
    throw new RenderError(`domain ${domain.slug} is static: it is not provisioned through SkyPilot`);
  }
  if (!domain.launch) throw new RenderError(`domain ${domain.slug} has no launch spec (setup/run) in its layout`);
  return domain.launch;
}

/**
 * Environment of the task on the host: who it is (`HARU_FLEET`, `HARU_DOMAIN`, `HARU_DOMAIN_ID`) plus the
 * launch spec's envs, which win. Never a secret: the supervisor token and the launch spec's `secrets` are
 * passed with `--secret NAME` at launch, so no value of theirs is in the YAML.
 */
function envsOf(input: RenderInput, extra: Record<string, string> | undefined): Record<string, string> {
  return {
    HARU_FLEET: input.fleetSlug,
    HARU_DOMAIN: input.domain.slug,
    HARU_DOMAIN_ID: input.domain.id,
    ...extra,
  };
}

/** The ports to open: the launch spec's, else the supervisor's (Haru must reach it). Sorted, unique. */
function portsOf(input: RenderInput, declared: number[] | undefined): number[] {
  const ports = declared?.length ? declared : [urlPort(input.domain.supervisorUrl)];
  return [...new Set(ports)].sort((a, b) => a - b);
}

/** The task document (as an object) for `sky launch`; see {@link renderTaskYaml}. */
export function taskDocument(input: RenderInput): Record<string, unknown> {
  const launch = launchOf(input);
  const doc: Record<string, unknown> = {
    name: skyNameFor(input.fleetSlug, input.domain.slug),
    resources: resourcesOf(input, portsOf(input, launch.ports)),
    envs: envsOf(input, launch.envs),
    ...commandsOf(launch),
  };
  return doc;
}

/**
 * The service document (as an object) for `sky serve up`: the task plus `service` with a readiness
 * probe on the service port and the replica count. SkyServe balances one port: it is `service.ports`
 * (written out, since the replica opens several), the supervisor's unless the launch spec names another.
 */
export function serviceDocument(input: RenderInput): Record<string, unknown> {
  const launch = launchOf(input);
  if ((launch.replicas ?? 1) > 1)
    throw new RenderError(`domain ${input.domain.slug}: replicas must be 1: ${ONE_REPLICA_REASON}`);
  const supervisorPort = urlPort(input.domain.supervisorUrl);
  const servicePort = launch.service?.port ?? supervisorPort;
  const ports = portsOf(input, [...(launch.ports ?? [supervisorPort]), servicePort]);
  const path = launch.service?.readinessPath ?? (servicePort === supervisorPort ? '/healthz' : '/health');
  const doc: Record<string, unknown> = {
    name: skyNameFor(input.fleetSlug, input.domain.slug),
    service: {
      ports: servicePort,
      readiness_probe: {
        path,
        initial_delay_seconds: launch.service?.initialDelaySeconds ?? DEFAULT_INITIAL_DELAY_SECONDS,
      },
      replicas: 1,
    },
    resources: resourcesOf(input, ports),
    envs: envsOf(input, launch.envs),
    ...commandsOf(launch),
  };
  return doc;
}

function toYaml(doc: Record<string, unknown>): string {
  const document = new Document(doc);
  // SkyPilot reads YAML 1.1 (PyYAML), where `yes`, `on` or `1:30` are not strings: quote every env value.
  const envs = document.get('envs', true) as YAMLMap<unknown, Scalar> | undefined;
  for (const pair of envs?.items ?? []) if (pair.value) pair.value.type = Scalar.QUOTE_DOUBLE;
  // lineWidth 0: never fold long commands; multi-line setup/run stay block literals.
  return document.toString({ lineWidth: 0 });
}

/**
 * SkyPilot task YAML for a `skypilot` domain: `name`, `resources` (infra from the placement's
 * cloud/region/zone, `accelerators`, `use_spot`, `ports`), `envs`, `setup`, `run`. Throws RenderError for
 * a static domain or one without a launch spec.
 */
export const renderTaskYaml = (input: RenderInput): string => toYaml(taskDocument(input));

/** SkyServe service YAML for a `skyserve` domain (see {@link serviceDocument}). Throws RenderError like renderTaskYaml. */
export const renderServiceYaml = (input: RenderInput): string => toYaml(serviceDocument(input));

/** The YAML `sky` needs for the domain's provider. */
export function renderDomainYaml(input: RenderInput): string {
  return input.domain.provider === 'skyserve' ? renderServiceYaml(input) : renderTaskYaml(input);
}
